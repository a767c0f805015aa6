// Products of a few rows with a float16 or bfloat16 matrix (token decoding:
// x (m x k) @ W.T with m of 1 to 16) read W as it is, 2 bytes an element,
// widening in registers; the GEMM path would first widen all of W to a
// float32 copy, 3x the memory traffic of the product itself.
#pragma once

#include <cstdint>

namespace kiln::detail {

/** Rows this path takes; more rows amortize a converted copy of W. */
constexpr int64_t half_matvec_max_rows = 16;

/** out[r * n + j] = alpha * sum_i x[r * k + i] * b(i, j) + beta * out[...]
 *  for r < m, j < n, where x is float32 row-major and b(i, j) is the 16-bit
 *  element at w[i * sr + j * sc]; one of sr and sc must be 1. T is
 *  float16_t or bfloat16_t. beta 0 ignores out's contents. */
template <typename T>
void half_matvec(const float* x, int64_t m, int64_t k, const T* w, int64_t sr,
                 int64_t sc, int64_t n, float alpha, float beta, float* out);

} // namespace kiln::detail
