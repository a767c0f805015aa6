// Helpers shared by the transformation rules of the slicing, indexing and
// sorting primitives.
#pragma once

#include <vector>

#include "kiln/core/array.h"
#include "kiln/primitives/batching.h"

namespace kiln::detail {

/** (b, 1, ..., 1) values 0..b-1 broadcast to shape (whose first entry is b):
 *  the index of the batch axis in a batched gather or scatter. */
array batch_index(const Shape& shape);

/** Start indices as gather and the dynamic slices read them: wrapped once
 *  when negative, then clamped so a slice of `size` fits in src's extent
 *  along axis (int64; that extent follows src under shapeless compile). */
array clamped_starts(const array& idx, const array& src, int axis, int size);

/** Whether a scatter writes the slice at idx: its wrapped start lies in
 *  [0, dim - size], dim src's extent along axis (a scatter drops the other
 *  slices). */
array starts_in_range(const array& idx, const array& src, int axis, int size);

/** Distinct integer ids for the elements of shape (row-major order): a
 *  scatter of them shows which update landed last at each position. */
array element_ids(const Shape& shape);

/** The tangent given for input i (argnums lists the inputs that have
 *  one), or zeros shaped like primals[i]. */
array tangent_of(int i, const std::vector<array>& primals,
                 const std::vector<array>& tangents,
                 const std::vector<int>& argnums);

} // namespace kiln::detail
