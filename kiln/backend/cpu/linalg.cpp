// LAPACK-backed linear algebra on the CPU. Each batch matrix is read (any
// strides) into a column-major scratch, factored by LAPACKE, and written back
// row-major; the O(n^2) copies are small next to the O(n^3) factorizations.
#include <algorithm>
#include <string>
#include <vector>

#include "kiln/backend/cpu/lapack.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

using namespace lapack;

namespace {

// Overloads so one template serves float and double.
lapack_int getrf(int n, float* a, lapack_int* ipiv) {
  return LAPACKE_sgetrf(LAPACK_COL_MAJOR, n, n, a, n, ipiv);
}
lapack_int getrf(int n, double* a, lapack_int* ipiv) {
  return LAPACKE_dgetrf(LAPACK_COL_MAJOR, n, n, a, n, ipiv);
}
lapack_int getri(int n, float* a, const lapack_int* ipiv) {
  return LAPACKE_sgetri(LAPACK_COL_MAJOR, n, a, n, ipiv);
}
lapack_int getri(int n, double* a, const lapack_int* ipiv) {
  return LAPACKE_dgetri(LAPACK_COL_MAJOR, n, a, n, ipiv);
}
lapack_int potrf(char uplo, int n, float* a) {
  return LAPACKE_spotrf(LAPACK_COL_MAJOR, uplo, n, a, n);
}
lapack_int potrf(char uplo, int n, double* a) {
  return LAPACKE_dpotrf(LAPACK_COL_MAJOR, uplo, n, a, n);
}
lapack_int geqrf(int m, int n, float* a, float* tau) {
  return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, a, m, tau);
}
lapack_int geqrf(int m, int n, double* a, double* tau) {
  return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, a, m, tau);
}
lapack_int orgqr(int m, int k, float* a, const float* tau) {
  return LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, k, k, a, m, tau);
}
lapack_int orgqr(int m, int k, double* a, const double* tau) {
  return LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, k, k, a, m, tau);
}
lapack_int gesdd(char job, int m, int n, float* a, float* s, float* u,
                 float* vt) {
  return LAPACKE_sgesdd(LAPACK_COL_MAJOR, job, m, n, a, m, s, u, m, vt, n);
}
lapack_int gesdd(char job, int m, int n, double* a, double* s, double* u,
                 double* vt) {
  return LAPACKE_dgesdd(LAPACK_COL_MAJOR, job, m, n, a, m, s, u, m, vt, n);
}
// complex64: U and V^H complex, the singular values real.
lapack_int gesdd(char job, int m, int n, complex64_t* a, float* s,
                 complex64_t* u, complex64_t* vt) {
  return LAPACKE_cgesdd(LAPACK_COL_MAJOR, job, m, n, lapack_complex(a), m, s,
                        u ? lapack_complex(u) : nullptr, m,
                        vt ? lapack_complex(vt) : nullptr, n);
}
lapack_int gesv(int n, int r, float* a, lapack_int* ipiv, float* b) {
  return LAPACKE_sgesv(LAPACK_COL_MAJOR, n, r, a, n, ipiv, b, n);
}
lapack_int gesv(int n, int r, double* a, lapack_int* ipiv, double* b) {
  return LAPACKE_dgesv(LAPACK_COL_MAJOR, n, r, a, n, ipiv, b, n);
}

} // namespace

void Inverse::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int n = a.shape(-1);
  dispatch_lapack(a.dtype(), "linalg::inv", [&](auto tag) {
    using T = KILN_TYPE(tag);
    std::vector<T> work(static_cast<size_t>(n) * n);
    std::vector<lapack_int> ipiv(n);
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      lapack_int info = getrf(n, work.data(), ipiv.data());
      check_internal("linalg::inv", info);
      if (info > 0) {
        linalg_failure("linalg::inv", i, offs.size(),
                       singular_pivot_reason(info));
      }
      check_internal("linalg::inv", getri(n, work.data(), ipiv.data()));
      write_rows(work.data(), n, n, n, out.data<T>() + i * n * n);
    }
  });
}

void Cholesky::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int n = a.shape(-1);
  dispatch_lapack(a.dtype(), "linalg::cholesky", [&](auto tag) {
    using T = KILN_TYPE(tag);
    std::vector<T> work(static_cast<size_t>(n) * n);
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      lapack_int info = potrf(upper_ ? 'U' : 'L', n, work.data());
      check_internal("linalg::cholesky", info);
      if (info > 0) {
        linalg_failure("linalg::cholesky", i, offs.size(),
                       not_positive_definite_reason(info));
      }
      // The factor is in the triangle LAPACK read (column-major).
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

void QRF::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array& q = outputs[0];
  array& r = outputs[1];
  q.set_data(allocator::malloc(q.nbytes()));
  r.set_data(allocator::malloc(r.nbytes()));
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  if (k == 0) return;
  dispatch_lapack(a.dtype(), "linalg::qr", [&](auto tag) {
    using T = KILN_TYPE(tag);
    std::vector<T> work(static_cast<size_t>(m) * n), tau(k);
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      check_internal("linalg::qr", geqrf(m, n, work.data(), tau.data()));
      T* ro = r.data<T>() + i * k * n;
      for (int row = 0; row < k; ++row) {
        for (int c = 0; c < n; ++c) {
          ro[row * n + c] = c >= row ? work[c * m + row] : T(0);
        }
      }
      check_internal("linalg::qr", orgqr(m, k, work.data(), tau.data()));
      write_rows(work.data(), m, m, k, q.data<T>() + i * m * k);
    }
  });
}

void SVD::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  dispatch_lapack<true>(a.dtype(), "linalg::svd", [&](auto tag) {
    using T = KILN_TYPE(tag);
    using R = real_of_t<T>; // the singular values' type
    if (k == 0) {
      // Nothing to factor: U and Vt are identities.
      if (!compute_uv_) return;
      for (int which : {0, 2}) {
        int d = which == 0 ? m : n;
        T* o = outputs[which].data<T>();
        for (size_t i = 0; i < outputs[which].size(); ++i) {
          size_t e = i % (static_cast<size_t>(d) * d);
          o[i] = e / d == e % d ? T(1) : T(0);
        }
      }
      return;
    }
    std::vector<T> work(static_cast<size_t>(m) * n), u, vt;
    if (compute_uv_) {
      u.resize(static_cast<size_t>(m) * m);
      vt.resize(static_cast<size_t>(n) * n);
    }
    R* s_out = outputs[compute_uv_ ? 1 : 0].data<R>();
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      lapack_int info = gesdd(compute_uv_ ? 'A' : 'N', m, n, work.data(),
                              s_out + i * k, compute_uv_ ? u.data() : nullptr,
                              compute_uv_ ? vt.data() : nullptr);
      check_internal("linalg::svd", info);
      if (info > 0) {
        linalg_failure("linalg::svd", i, offs.size(),
                       "the SVD did not converge");
      }
      if (compute_uv_) {
        write_rows(u.data(), m, m, m, outputs[0].data<T>() + i * m * m);
        write_rows(vt.data(), n, n, n, outputs[2].data<T>() + i * n * n);
      }
    }
  });
}

void Solve::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int n = a.shape(-1), r = b.shape(-1);
  dispatch_lapack(a.dtype(), "linalg::solve", [&](auto tag) {
    using T = KILN_TYPE(tag);
    std::vector<T> wa(static_cast<size_t>(n) * n),
        wb(static_cast<size_t>(n) * r);
    std::vector<lapack_int> ipiv(n);
    auto oa = batch_offsets(a), ob = batch_offsets(b);
    for (size_t i = 0; i < oa.size(); ++i) {
      read_cols(a, oa[i], wa.data());
      read_cols(b, ob[i], wb.data());
      lapack_int info = gesv(n, r, wa.data(), ipiv.data(), wb.data());
      check_internal("linalg::solve", info);
      if (info > 0) {
        linalg_failure("linalg::solve", i, oa.size(),
                       singular_pivot_reason(info));
      }
      write_rows(wb.data(), n, n, r, out.data<T>() + i * n * r);
    }
  });
}

} // namespace kiln
