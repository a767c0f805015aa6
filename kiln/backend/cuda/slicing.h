// Names and instantiations of the dynamic-window copies
// (device/slicing.cuh): g{DynamicSlice|DynamicSliceUpdate}{in}[_{out}]_
// {start}[_i64], the element dtypes raw (unsigned of the size) when no
// conversion happens.
#pragma once

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** into_out: the window is in the output (DynamicSliceUpdate), else in the
 *  input (DynamicSlice). */
JitKernel dynamic_copy_kernel(Dtype in, Dtype out, Dtype start,
                              bool into_out, bool large);

} // namespace kiln::cuda
