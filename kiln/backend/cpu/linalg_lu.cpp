// LU factorization and triangular inverses on the CPU (LAPACK getrf and
// trtri), with the batch handling of lapack.h.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/backend/cpu/lapack.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

using namespace lapack;

namespace {

lapack_int getrf(int m, int n, float* a, lapack_int* ipiv) {
  return LAPACKE_sgetrf(LAPACK_COL_MAJOR, m, n, a, m, ipiv);
}
lapack_int getrf(int m, int n, double* a, lapack_int* ipiv) {
  return LAPACKE_dgetrf(LAPACK_COL_MAJOR, m, n, a, m, ipiv);
}
lapack_int trtri(char uplo, int n, float* a) {
  return LAPACKE_strtri(LAPACK_COL_MAJOR, uplo, 'N', n, a, n);
}
lapack_int trtri(char uplo, int n, double* a) {
  return LAPACKE_dtrtri(LAPACK_COL_MAJOR, uplo, 'N', n, a, n);
}

} // namespace

void TriangularInverse::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int n = a.shape(-1);
  const char* op = "linalg::tri_inv";
  dispatch_lapack(a.dtype(), op, [&](auto tag) {
    using T = KILN_TYPE(tag);
    std::vector<T> work(static_cast<size_t>(n) * n);
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      lapack_int info = trtri(upper_ ? 'U' : 'L', n, work.data());
      check_internal(op, info);
      if (info > 0) {
        linalg_failure(op, i, offs.size(), zero_diagonal_reason(info));
      }
      // trtri leaves the triangle it did not read untouched.
      T* o = out.data<T>() + i * n * n;
      for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c) {
          bool keep = upper_ ? c >= r : c <= r;
          o[r * n + c] = keep ? work[c * n + r] : T(0);
        }
      }
    }
  });
}

void LUF::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array& lu = outputs[0];
  array& pivots = outputs[1];
  array& perm = outputs[2];
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  if (a.size() == 0) {
    // No entries to factor, but rows may still need their (identity) order.
    uint32_t* po = perm.data<uint32_t>();
    for (size_t i = 0; i < perm.size(); ++i) po[i] = i % std::max(m, 1);
    return;
  }
  dispatch_lapack(a.dtype(), "linalg::lu_factor", [&](auto tag) {
    using T = KILN_TYPE(tag);
    std::vector<T> work(static_cast<size_t>(m) * n);
    std::vector<lapack_int> ipiv(k);
    std::vector<uint32_t> order(m);
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      // info > 0 only reports an exact zero on U's diagonal: the factors are
      // still valid, so a singular matrix is not an error here.
      check_internal("linalg::lu_factor",
                     getrf(m, n, work.data(), ipiv.data()));
      write_rows(work.data(), m, m, n, lu.data<T>() + i * m * n);
      // Apply the swaps to the identity to get the rows of a that make up
      // L U in order, then invert that to say where each row of a went.
      std::iota(order.begin(), order.end(), 0u);
      uint32_t* pv = pivots.data<uint32_t>() + i * k;
      for (int r = 0; r < k; ++r) {
        pv[r] = static_cast<uint32_t>(ipiv[r] - 1);
        std::swap(order[r], order[pv[r]]);
      }
      uint32_t* po = perm.data<uint32_t>() + i * m;
      for (int r = 0; r < m; ++r) po[order[r]] = r;
    }
  });
}

} // namespace kiln
