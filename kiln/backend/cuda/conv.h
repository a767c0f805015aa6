// Names and instantiations of the im2col kernels (device/conv.cuh) that
// Convolution's GPU path runs before its GEMM, shared by the launcher and
// the ahead-of-time table: gIm2Col{nd}{dtype}[_{patch dtype}][_i64], the
// patch dtype when it differs (float32 patches of float16/bfloat16 inputs,
// for split reductions), "_i64" for patch matrices of 2^32 rows or columns
// or more.
#pragma once

#include <cstddef>

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** The im2col kernel reading dtype `in` and writing patches of dtype
 *  `out` for nd spatial axes (1 to 3), the other two compiled alongside. */
JitKernel im2col_kernel(Dtype in, Dtype out, int nd, bool i64);

/** The most scratch one convolution's patch-matrix tile may take (bytes;
 *  256 MiB by default): larger patch matrices are built and multiplied in
 *  tiles of rows, and of columns when one row alone is larger (float16/
 *  bfloat16 then accumulate in a float32 copy of the output). Tests lower
 *  it to reach the tiled paths with small inputs; 0 restores the default. */
void set_conv_scratch_limit(size_t bytes);
size_t conv_scratch_limit();

} // namespace kiln::cuda
