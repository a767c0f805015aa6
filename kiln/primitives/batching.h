// Helpers the vmap rules share: moving a mapped input's batch axis first,
// giving an unmapped one a batch axis, and the mapped size.
#pragma once

#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::detail {

/** x with its batch axis (axis >= 0) first; x itself for axis 0 or an
 *  unmapped x (axis -1). */
array batch_first(const array& x, int axis, StreamOrDevice s = {});

/** x with its batch axis first; an unmapped x (axis -1) gains a leading
 *  axis of size b as a broadcast view. */
array to_batch_first(const array& x, int axis, int b);

/** x with its batch axis first, or with a leading axis of size 1 when it is
 *  not mapped (for ops that broadcast it). */
array batch_first_or_one(const array& x, int axis);

/** The size of the mapped axis (the first input with axis >= 0), else 1. */
int batch_size(const std::vector<array>& inputs, const std::vector<int>& axes);

/** shape with a leading batch axis of size b. */
Shape with_batch(int b, const Shape& shape);

} // namespace kiln::detail
