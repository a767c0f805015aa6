// GEMM through cuBLASLt for a row-major framework. cuBLASLt is column-major,
// and a row-major R x C buffer is a column-major C x R one, so out = a @ b is
// computed as out^T = b^T a^T: b goes in as cuBLASLt's "A", a as its "B",
// and D is N x M with ld N (see notes on the operand swap). Transposed
// operands are read in place through TRANSA/TRANSB. Plans (descriptors,
// algorithm, workspace size) are cached by everything that shapes them,
// including each pointer's alignment class.
#pragma once

#include <cstdint>

#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** One operand as stored: rows x cols of the row-major matrix it holds,
 *  `transposed` when its memory is column-major (strides (1, ld)) rather
 *  than row-major (strides (ld, 1)); batch_stride in elements (0 for a
 *  broadcast batch). */
struct GemmOperand {
  const void* ptr;
  bool transposed;
  int64_t ld;
  int64_t batch_stride;
};

struct GemmArgs {
  Dtype dtype = float32;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  GemmOperand a{}, b{}; // out[M,N] = a[M,K] @ b[K,N]
  void* out = nullptr;  // row-major
  // out's row stride (0: n) and batch stride (0: m * n), in elements: a
  // grouped convolution writes each group's columns of one wider matrix.
  int64_t out_ld = 0, out_batch_stride = 0;
  float alpha = 1.0f, beta = 0.0f; // beta reads out as C (C = D)
  const void* bias = nullptr; // packed length-n vector: the BIAS epilogue
  int stream = 0;
};

/** True for the dtypes cuBLASLt runs here: float32, float16, bfloat16,
 *  float64, complex64 (transposed operands are transposed, not conjugated). */
bool gemm_supports(Dtype dt);

/** Runs the GEMM. Returns false when cuBLASLt has no algorithm for it (for
 *  example a bias epilogue it does not support for the dtype), so the
 *  caller can take the general path. */
bool gemm(const GemmArgs& args);

/** Whether float32 GEMMs may use TF32 tensor cores (about 10 bits of
 *  mantissa in the products). Off by default; the environment variable
 *  KILN_ALLOW_TF32=1 turns it on at start-up. */
void set_allow_tf32(bool allow);
bool allow_tf32();

} // namespace kiln::cuda
