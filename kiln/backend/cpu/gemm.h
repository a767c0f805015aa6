// Row-major GEMM through CBLAS for the types BLAS has (float, double,
// complex64), and the strided-operand plumbing shared by matmul and conv.
#pragma once

#include "kiln/backend/cpu/blas.h"

#include <climits>
#include <stdexcept>
#include <string>
#include <cstdint>
#include <vector>

#include "kiln/core/cast.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/dtype.h"

namespace kiln::detail {

/** Warns once when OpenBLAS runs generic kernels on a CPU it does not know
 *  (blas_check.cpp). */
void check_blas_core_once();

/** C (M x N, ldc) = alpha * op(A) @ op(B) + beta * C, all row-major. */
inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta,
                 float* c, int ldc) {
  check_blas_core_once();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

inline void gemm(bool ta, bool tb, int m, int n, int k, double alpha,
                 const double* a, int lda, const double* b, int ldb,
                 double beta, double* c, int ldc) {
  check_blas_core_once();
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

inline void gemm(bool ta, bool tb, int m, int n, int k, complex64_t alpha,
                 const complex64_t* a, int lda, const complex64_t* b, int ldb,
                 complex64_t beta, complex64_t* c, int ldc) {
  check_blas_core_once();
  cblas_cgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, &alpha, a, lda, b, ldb,
              &beta, c, ldc);
}

/** A rows x cols matrix as BLAS reads it: a pointer, whether it is stored
 *  transposed, and its leading dimension. */
template <typename G>
struct GemmOperand {
  const G* ptr;
  bool trans;
  int ld;
};

/** Whether strides (sr, sc) of a rows x cols matrix are a BLAS layout:
 *  unit stride along one axis, a leading dimension >= the other extent. */
inline bool blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc,
                        bool& trans, int& ld) {
  auto ok = [](int64_t v, int64_t lo) { return v >= lo && v <= INT_MAX; };
  int64_t rmin = rows > 1 ? rows : 1, cmin = cols > 1 ? cols : 1;
  if ((sc == 1 || cols <= 1) && (rows <= 1 || ok(sr, cmin))) {
    trans = false;
    ld = static_cast<int>(rows <= 1 ? cmin : sr);
    return true;
  }
  if ((sr == 1 || rows <= 1) && (cols <= 1 || ok(sc, rmin))) {
    trans = true;
    ld = static_cast<int>(cols <= 1 ? rmin : sc);
    return true;
  }
  return false;
}

/** Operand for GEMM in type G from a strided matrix of type T: used in
 *  place when T is G and the layout suits BLAS, else converted into
 *  scratch (row-major). */
template <typename G, typename T>
GemmOperand<G> gemm_operand(const T* p, int64_t rows, int64_t cols, int64_t sr,
                            int64_t sc, std::vector<G>& scratch) {
  bool trans;
  int ld;
  if constexpr (std::is_same_v<T, G>) {
    if (blas_layout(rows, cols, sr, sc, trans, ld)) return {p, trans, ld};
  }
  scratch.resize(static_cast<size_t>(rows * cols));
  G* dst = scratch.data();
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = p + r * sr;
    for (int64_t c = 0; c < cols; ++c)
      dst[r * cols + c] = cast_to<G>(src[c * sc]);
  }
  return {dst, false, static_cast<int>(cols > 1 ? cols : 1)};
}

/** f(T{}, G{}) for the storage type T of real floating dtype dt and the
 *  type G its GEMMs run in (float for the 16-bit floats); raises for any
 *  other dtype, naming op. */
template <typename F>
void dispatch_real_gemm(const char* op, Dtype dt, F&& f) {
  dispatch_type(dt, [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (is_half_v<T>) {
      f(T{}, float{});
    } else if constexpr (std::is_floating_point_v<T>) {
      f(T{}, T{});
    } else {
      throw std::invalid_argument(std::string("[") + op +
                                  "] unsupported dtype " + dtype_name(dt) +
                                  ".");
    }
  });
}

} // namespace kiln::detail
