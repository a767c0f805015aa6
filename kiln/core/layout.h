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

} // namespace kiln
