// Layout facts derived from a shape and strides.
#pragma once

#include "kiln/core/array.h"

namespace kiln {

struct Layout {
  size_t data_size;
  array::Flags flags;
};

/** data_size and flags of a view with these strides (see array::Flags). */
Layout layout_of(const Shape& shape, const Strides& strides);

/** The flags of a row-major array of this shape (layout_of's answer for
 *  row_major_strides(shape), without walking the strides): contiguous and
 *  row-contiguous; column-contiguous too only when at most one axis is
 *  longer than 1 or the array is empty. */
array::Flags row_major_flags(const Shape& shape);

/** Strides that show in over shape (which it broadcasts to) without a
 *  copy: in's own along its axes, aligned from the right, and 0 along the
 *  axes it lacks or has of length 1. */
Strides broadcast_strides(const array& in, const Shape& shape);

} // namespace kiln
