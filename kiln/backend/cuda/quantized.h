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

/** Rows of x each quantized_matvec block reads: 1, 2 or 4; threads of
 *  each of its groups over an inner dimension: quantized_matvec_threads. */
JitKernel quantized_matvec_kernel(Dtype dt, int bits, int rows,
                                  int threads);
/** The threads of a quantized_matvec group for an inner dimension k: the
 *  block's 128 threads, or 64 or 32 for rows of fewer 32-code blocks
 *  than that, so that none idles (8 tokens of a 2048 -> 1408
 *  mixture-of-experts projection left half of them without a block). */
int quantized_matvec_threads(int64_t k);
/** dt float16 or bfloat16, bits 4 or 8. */
JitKernel quantized_mma_kernel(Dtype dt, int bits);
JitKernel quantized_gemm_kernel(Dtype dt, int bits);
/** The sum of quantized_gemm's splits, rounded to dt. */
JitKernel sum_partials_kernel(Dtype dt);
JitKernel dequantize_kernel(Dtype scales, Dtype out, int bits);

} // namespace kiln::cuda
