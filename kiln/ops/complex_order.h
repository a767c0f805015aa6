// MLX's order of complex64 values (real part, then imaginary part; values
// with a NaN part last, equal to one another) as integer keys, shared by
// the sorts (sort.cpp) and searches (search.cpp).
#pragma once

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::detail {

/** uint64 keys of complex64 values whose unsigned order is MLX's order of
 *  the values: the real part's float order in the high 32 bits, the
 *  imaginary part's in the low (-0 as +0), and the largest key for a value
 *  with a NaN part. */
array complex_order_keys(const array& z, StreamOrDevice s);

} // namespace kiln::detail
