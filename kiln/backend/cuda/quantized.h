// Names and instantiations of the quantization kernels, shared by the
// launchers and the ahead-of-time table. Affine (device/quantized.cuh):
// "bQuantizedMatvec{bits}r{rows}t{threads}{dtype}" (rows of x per block:
// 1, 2 or 4, compiled together), "bQuantizedMma{bits}{dtype}",
// "bQuantizedGemm{bits}{dtype}" with "vSumPartials{dtype}", and
// "vDequantize{bits}{scales}{out}"; the microscaling modes
// (device/quantized_fp.cuh): "bQuantizedMatvecFp{bits}g{group}r{rows}
// t{threads}{dtype}" and "vDequantizeFp{bits}g{group}{out}".
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kiln/backend/cuda/device/quantized_blocks.cuh"
#include "kiln/backend/cuda/jit_module.h"
#include "kiln/backend/cuda/launch_queue.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

// Past this many rows of x, the weight is dequantized for a GEMM: 16
// rows read the codes four times (4096 x 4096 at 4 bits: 4 x 8 MB)
// against writing and reading a 32 MB float16 copy. Picks (gather_qmm's
// indexed form) come with at most this many rows
// (fast::QuantizedMatmul::max_picked_rows).
inline constexpr int64_t qmv_max_rows = 16;

/** The kernels' vector loads need 16-byte aligned rows: views at other
 *  offsets (never made by kiln's ops) go to the CPU. */
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

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
/** The rows of x a matvec block takes for m rows: 1, 2 or 4. */
int quantized_matvec_rows(int64_t m);
/** Launches matvec f (either format's, the same blocks) over m rows of x,
 *  n weight rows and batch entries, with its arguments. */
void launch_matvec(CUfunction f, KernelArgs args, int64_t m, int64_t n,
                   int64_t batch, int rows, int threads, int stream);
/** The microscaling modes' matvec: bits 4 or 8, group_size 16 or 32. */
JitKernel quantized_matvec_fp_kernel(Dtype dt, int bits, int group_size,
                                     int rows, int threads);
JitKernel dequantize_fp_kernel(Dtype out, int bits, int group_size);
/** dt float16 or bfloat16, bits 4 or 8. */
JitKernel quantized_mma_kernel(Dtype dt, int bits);
JitKernel quantized_gemm_kernel(Dtype dt, int bits);
/** The sum of quantized_gemm's splits, rounded to dt. */
JitKernel sum_partials_kernel(Dtype dt);
JitKernel dequantize_kernel(Dtype scales, Dtype out, int bits);

} // namespace kiln::cuda
