// Helpers shared by the fast ops' fallback graphs.
#pragma once

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::fast::detail {

/** Batched a @ b from broadcast multiply and sum, (..., M, K) x (..., K, N):
 *  a stand-in for matmul inside fallbacks, materializing (..., M, K, N). */
array matmul_by_sum(const array& a, const array& b, Stream s);

/** The dtype fallbacks compute in: float64 stays, the rest use float32. */
Dtype acc_dtype(Dtype d);

} // namespace kiln::fast::detail
