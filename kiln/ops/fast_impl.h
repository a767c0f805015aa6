// Helpers shared by the fast ops' fallback graphs.
#pragma once

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::fast::detail {

/** The dtype fallbacks compute in: float64 stays, the rest use float32. */
Dtype acc_dtype(Dtype d);

} // namespace kiln::fast::detail
