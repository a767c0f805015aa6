// Names and instantiations of the affine-quantization kernels
// (device/quantized.cuh), shared by the launchers and the ahead-of-time
// table. "bQuantizedMatvec{bits}r{rows}{dtype}" (rows of x per block: 1, 2
// or 4, compiled together), "bQuantizedMma{bits}{dtype}",
// "bQuantizedGemm{bits}{dtype}" with "vSumPartials{dtype}", and
// "vDequantize{bits}{scales}{out}".
#pragma once

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** The dtypes the quantization kernels take, for x, the scales and the
 *  dequantized output: float32, float16, bfloat16. */
inline bool quantized_kernels_support(Dtype dt) {
  return dt == float32 || dt == float16 || dt == bfloat16;
}

/** Rows of x each quantized_matvec block reads; 1, 2 or 4. */
JitKernel quantized_matvec_kernel(Dtype dt, int bits, int rows);
/** dt float16 or bfloat16, bits 4 or 8. */
JitKernel quantized_mma_kernel(Dtype dt, int bits);
JitKernel quantized_gemm_kernel(Dtype dt, int bits);
/** The sum of quantized_gemm's splits, rounded to dt. */
JitKernel sum_partials_kernel(Dtype dt);
JitKernel dequantize_kernel(Dtype scales, Dtype out, int bits);

} // namespace kiln::cuda
