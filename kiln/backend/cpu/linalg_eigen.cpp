// Eigendecompositions on the CPU: symmetric or Hermitian (LAPACK syevd,
// cheevd) and general (geev, complex results), with the batch handling of
// lapack.h.
#include <complex>
#include <string>
#include <vector>

#include "kiln/backend/cpu/lapack.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

using namespace lapack;

namespace {

lapack_int syevd(char job, char uplo, int n, float* a, float* w) {
  return LAPACKE_ssyevd(LAPACK_COL_MAJOR, job, uplo, n, a, n, w);
}
lapack_int syevd(char job, char uplo, int n, double* a, double* w) {
  return LAPACKE_dsyevd(LAPACK_COL_MAJOR, job, uplo, n, a, n, w);
}
// complex64 Hermitian: real eigenvalues, complex vectors.
lapack_int syevd(char job, char uplo, int n, complex64_t* a, float* w) {
  return LAPACKE_cheevd(LAPACK_COL_MAJOR, job, uplo, n, lapack_complex(a), n,
                        w);
}
lapack_int geev(char jobvr, int n, float* a, float* wr, float* wi, float* vr) {
  return LAPACKE_sgeev(LAPACK_COL_MAJOR, 'N', jobvr, n, a, n, wr, wi, nullptr,
                       1, vr, n);
}
lapack_int geev(char jobvr, int n, double* a, double* wr, double* wi,
                double* vr) {
  return LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', jobvr, n, a, n, wr, wi, nullptr,
                       1, vr, n);
}

// complex64 general (cgeev): complex eigenvalues and right vectors.
void complex_eig(const array& a, std::vector<array>& outputs, bool vectors,
                 const char* op) {
  int n = a.shape(-1);
  size_t nn = static_cast<size_t>(n) * n;
  std::vector<complex64_t> work(nn), vr(vectors ? nn : 1);
  auto offs = batch_offsets(a);
  for (size_t i = 0; i < offs.size(); ++i) {
    read_cols(a, offs[i], work.data());
    lapack_int info = LAPACKE_cgeev(
        LAPACK_COL_MAJOR, 'N', vectors ? 'V' : 'N', n,
        lapack_complex(work.data()), n,
        lapack_complex(outputs[0].data<complex64_t>() + i * n), nullptr, 1,
        lapack_complex(vr.data()), vectors ? n : 1);
    check_internal(op, info);
    if (info > 0) {
      linalg_failure(op, i, offs.size(), "the QR algorithm did not converge");
    }
    if (vectors) {
      write_rows(vr.data(), n, n, n, outputs[1].data<complex64_t>() + i * nn);
    }
  }
}

} // namespace

void Eigh::eval_cpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const array& a = inputs[0];
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  if (a.size() == 0) return;
  int n = a.shape(-1);
  const char* op = vectors_ ? "linalg::eigh" : "linalg::eigvalsh";
  dispatch_lapack<true>(a.dtype(), op, [&](auto tag) {
    using T = KILN_TYPE(tag);
    using R = real_of_t<T>; // the eigenvalues' type
    std::vector<T> work(static_cast<size_t>(n) * n);
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      lapack_int info = syevd(vectors_ ? 'V' : 'N', uplo_, n, work.data(),
                              outputs[0].data<R>() + i * n);
      check_internal(op, info);
      if (info > 0) {
        linalg_failure(op, i, offs.size(), "the solver did not converge");
      }
      if (vectors_) {
        write_rows(work.data(), n, n, n, outputs[1].data<T>() + i * n * n);
      }
    }
  });
}

void Eig::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  if (a.size() == 0) return;
  int n = a.shape(-1);
  const char* op = vectors_ ? "linalg::eig" : "linalg::eigvals";
  if (a.dtype() == complex64) return complex_eig(a, outputs, vectors_, op);
  dispatch_lapack(a.dtype(), op, [&](auto tag) {
    using T = KILN_TYPE(tag);
    size_t nn = static_cast<size_t>(n) * n;
    std::vector<T> work(nn), wr(n), wi(n), vr(vectors_ ? nn : 1);
    auto offs = batch_offsets(a);
    for (size_t i = 0; i < offs.size(); ++i) {
      read_cols(a, offs[i], work.data());
      lapack_int info = geev(vectors_ ? 'V' : 'N', n, work.data(), wr.data(),
                             wi.data(), vr.data());
      check_internal(op, info);
      if (info > 0) {
        linalg_failure(op, i, offs.size(),
                       "the QR algorithm did not converge");
      }
      complex64_t* w = outputs[0].data<complex64_t>() + i * n;
      for (int j = 0; j < n; ++j) w[j] = complex64_t(wr[j], wi[j]);
      if (!vectors_) continue;
      // A complex pair (wi[j] > 0, then its conjugate) keeps its vector's
      // real part in column j and imaginary part in column j + 1.
      complex64_t* v = outputs[1].data<complex64_t>() + i * nn;
      for (int j = 0; j < n; ++j) {
        bool pair = wi[j] != 0 && j + 1 < n;
        for (int r = 0; r < n; ++r) {
          T re = vr[j * n + r];
          if (!pair) {
            v[r * n + j] = complex64_t(re, 0);
            continue;
          }
          T im = vr[(j + 1) * n + r];
          v[r * n + j] = complex64_t(re, im);
          v[r * n + j + 1] = complex64_t(re, -im);
        }
        if (pair) ++j;
      }
    }
  });
}

} // namespace kiln
