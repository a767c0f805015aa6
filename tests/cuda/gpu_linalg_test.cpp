// GPU linear algebra (cuSOLVER) against the CPU backend (LAPACK): Cholesky
// (both triangles), triangular inverses, inverses, solves with one and many
// right sides, symmetric eigen-decompositions, LU (with its pivots and row
// order, det and slogdet), QR and the SVD of square, tall and wide
// matrices, in float32 and float64, batched, on transposed and broadcast
// inputs; the failures raise as on the CPU, naming the matrix of the batch.
// Factors unique only up to signs (eigenvectors, Q and R, singular
// vectors) are checked by their defining identities and magnitudes, and a
// matrix gets the same ones alone as in a batch.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda/gpu_fixture.h"
#include "kiln/ops/utils.h"
#if KILN_HAS_CUDA
#include "kiln/backend/cuda/cusolver.h"
#endif

namespace kiln::test {
namespace {

using GpuLinalg = GpuTest;

double tol_of(Dtype dt) { return dt == float32 ? 3e-4 : 1e-10; }

// Random matrices in [-1, 1) with shift added to the diagonal; past
// 1.5 sqrt(n) (their eigenvalues' radius) they are well conditioned.
array shifted(const Shape& shape, Dtype dt, double shift) {
  int n = shape.back();
  array a = add(random_array(shape, dt, -1, 1),
                astype(multiply(eye(n), array(shift)), dt));
  eval(a);
  return a;
}

// Symmetric positive definite: a a^T + n I.
array spd(const Shape& shape, Dtype dt) {
  array a = random_array(shape, dt, -1, 1);
  int n = shape.back();
  array s = add(matmul(a, swapaxes(a, -1, -2)),
                astype(multiply(eye(n), array(static_cast<double>(n))), dt));
  eval(s);
  return s;
}

// The inputs each case meets: contiguous, transposed (not row-major) and a
// broadcast batch of one matrix.
std::vector<std::pair<std::string, array>> inputs_of(const array& a) {
  Shape one = a.shape();
  one[0] = 1;
  return {{"contiguous", a},
          {"transposed", swapaxes(a, -1, -2)},
          {"broadcast", broadcast_to(slice(a, Shape(a.ndim(), 0), one),
                                     a.shape())}};
}

#if KILN_HAS_CUDA
TEST_F(GpuLinalg, CuSolverLoads) {
  // The toolkit's cuSOLVER is what serves these on the GPU.
  EXPECT_TRUE(cuda::cusolver::available());
}
#endif

TEST_F(GpuLinalg, CholeskyAndTriangularInverse) {
  // Batches of small matrices take cuSOLVER's batched Cholesky; 160 one
  // call per matrix, a lower factor through transposed copies, and its
  // triangular inverse cuBLAS's trsm. Small values added above the
  // diagonal make the triangle read matter.
  for (Dtype dt : {float32, float64}) {
    for (int n : {1, 7, 64, 160}) {
      array lopsided = add(spd({3, n, n}, dt),
                           triu(random_array({3, n, n}, dt, 0, 0.5), 1));
      for (auto& [layout, a] : inputs_of(lopsided)) {
        for (bool upper : {false, true}) {
          auto chol = [upper](const std::vector<array>& v, Device d) {
            return linalg::cholesky(v[0], upper, d);
          };
          EXPECT_TRUE(same_on_devices(chol, {a}, tol_of(dt)))
              << dtype_name(dt) << " n " << n << " " << layout << " upper "
              << upper;
          auto tinv = [upper](const std::vector<array>& v, Device d) {
            return linalg::tri_inv(v[0], upper, d);
          };
          EXPECT_TRUE(same_on_devices(tinv, {shifted({3, n, n}, dt, 3)},
                                      tol_of(dt)))
              << dtype_name(dt) << " n " << n << " upper " << upper;
        }
      }
    }
  }
}

TEST_F(GpuLinalg, InverseAndSolve) {
  for (Dtype dt : {float32, float64}) {
    for (int n : {1, 9, 96}) {
      double shift = 2 + 1.5 * std::sqrt(n);
      for (auto& [layout, a] : inputs_of(shifted({4, n, n}, dt, shift))) {
        auto inverse = [](const std::vector<array>& v, Device d) {
          return linalg::inv(v[0], d);
        };
        EXPECT_TRUE(same_on_devices(inverse, {a}, tol_of(dt)))
            << dtype_name(dt) << " n " << n << " " << layout;
        auto solved = [](const std::vector<array>& v, Device d) {
          return linalg::solve(v[0], v[1], d);
        };
        // A 1-d right side is one vector for every matrix (MLX's rule).
        array vec = random_array({n}, dt, -1, 1);
        array many = random_array({4, n, 5}, dt, -1, 1);
        EXPECT_TRUE(same_on_devices(solved, {a, vec}, tol_of(dt)))
            << dtype_name(dt) << " n " << n << " " << layout << " vector";
        EXPECT_TRUE(same_on_devices(solved, {a, many}, tol_of(dt)))
            << dtype_name(dt) << " n " << n << " " << layout << " 5 sides";
        EXPECT_TRUE(same_on_devices(solved, {a, as_transposed(many)},
                                    tol_of(dt)))
            << dtype_name(dt) << " n " << n << " " << layout
            << " transposed sides";
      }
    }
    // Orders and right sides up to 64 (above: 1 and 9) are solved whole
    // by one kernel, here batches of 40 with 3, 40 and 64 right sides and
    // inverses of order 48 and 64; past 64 right sides a batch of 40 small
    // systems runs on the host's LAPACK, and matrices of order 80 one
    // cuSOLVER call each.
    auto inverse = [](const std::vector<array>& v, Device d) {
      return linalg::inv(v[0], d);
    };
    auto solved = [](const std::vector<array>& v, Device d) {
      return linalg::solve(v[0], v[1], d);
    };
    array small = shifted({40, 5, 5}, dt, 6);
    EXPECT_TRUE(same_on_devices(inverse, {small}, tol_of(dt)));
    EXPECT_TRUE(same_on_devices(
        solved, {small, random_array({40, 5, 3}, dt, -1, 1)}, tol_of(dt)));
    EXPECT_TRUE(same_on_devices(
        solved, {small, random_array({40, 5, 40}, dt, -1, 1)}, tol_of(dt)));
    for (int n : {48, 64}) {
      array big = shifted({40, n, n}, dt, 2 + 1.5 * std::sqrt(n));
      EXPECT_TRUE(same_on_devices(inverse, {big}, tol_of(dt)))
          << dtype_name(dt) << " n " << n;
      EXPECT_TRUE(same_on_devices(
          solved, {big, random_array({40, n, 64}, dt, -1, 1)}, tol_of(dt)))
          << dtype_name(dt) << " n " << n << " 64 sides";
    }
    array mid = shifted({40, 48, 48}, dt, 13);
    EXPECT_TRUE(same_on_devices(
        solved, {mid, random_array({40, 48, 65}, dt, -1, 1)}, tol_of(dt)));
    EXPECT_TRUE(same_on_devices(inverse, {shifted({40, 80, 80}, dt, 16)},
                                tol_of(dt)));
  }
}

TEST_F(GpuLinalg, SymmetricEigen) {
  // Eigenvalues against the CPU's; eigenvectors by what defines them,
  // V^T V = I and A V = V diag(w). (Comparing them with the CPU's, unique
  // only up to sign and within clusters of close eigenvalues, fails on
  // random matrices whose eigenvalues happen to lie close.) Orders 1 and 6
  // take cuSOLVER's batched Jacobi routine, 48 syevd.
  for (Dtype dt : {float32, float64}) {
    double vec_tol = dt == float32 ? 5e-3 : 1e-9;
    for (int n : {1, 6, 48}) {
      for (auto& [layout, a] : inputs_of(spd({3, n, n}, dt))) {
        for (const char* uplo : {"L", "U"}) {
          auto values = [uplo](const std::vector<array>& v, Device d) {
            return linalg::eigvalsh(v[0], uplo, d);
          };
          EXPECT_TRUE(same_on_devices(values, {a}, tol_of(dt)))
              << dtype_name(dt) << " n " << n << " " << layout << " " << uplo;
          auto [w, v] = linalg::eigh(a, uplo, Device::gpu);
          array gram = matmul(swapaxes(v, -1, -2), v, Device::cpu);
          array eye_b = broadcast_to(astype(eye(n), dt), {3, n, n});
          EXPECT_TRUE(all_close(to_doubles(gram), to_doubles(eye_b), 0,
                                vec_tol))
              << dtype_name(dt) << " n " << n << " " << layout << " " << uplo;
          array av = matmul(a, v, Device::cpu);
          array vw = multiply(v, expand_dims(w, -2), Device::cpu);
          EXPECT_TRUE(all_close(to_doubles(av), to_doubles(vw), 0,
                                vec_tol * n))
              << dtype_name(dt) << " n " << n << " " << layout << " " << uplo;
        }
      }
    }
  }
}

TEST_F(GpuLinalg, LuAndDeterminants) {
  for (Dtype dt : {float32, float64}) {
    // Batches of square matrices up to order 64 take cuBLAS's batched
    // getrf (40 of them: where a cuSOLVER call each gave way to the host),
    // the others cuSOLVER's getrf per matrix.
    for (Shape shape : {Shape{3, 7, 7}, Shape{2, 9, 5}, Shape{2, 5, 9},
                        Shape{40, 8, 8}, Shape{40, 24, 24}, Shape{2, 70, 70},
                        Shape{1, 7, 7}}) {
      // A shift of 1 keeps rows of the small matrices swapping (pivots)
      // and them invertible for det; larger ones take the shift that keeps
      // them well conditioned.
      int order = shape[2];
      double shift = order <= 9 ? 1 : 2 + 1.5 * std::sqrt(order);
      array base = shape[1] == shape[2] ? shifted(shape, dt, shift)
                                        : random_array(shape, dt, -1, 1);
      for (auto& [layout, a] : inputs_of(base)) {
        for (int out : {0, 1, 2}) {
          auto part = [out](const std::vector<array>& v, Device d) {
            return linalg::lu(v[0], d)[out];
          };
          EXPECT_TRUE(same_on_devices(part, {a}, tol_of(dt)))
              << dtype_name(dt) << " " << layout << " output " << out;
        }
        auto factor = [](const std::vector<array>& v, Device d) {
          return linalg::lu_factor(v[0], d).second;
        };
        EXPECT_TRUE(same_on_devices(factor, {a}, 0)) << "pivots";
        if (a.shape(-1) != a.shape(-2)) continue;
        auto det = [](const std::vector<array>& v, Device d) {
          return linalg::det(v[0], d);
        };
        EXPECT_TRUE(same_on_devices(det, {a}, tol_of(dt))) << "det";
        auto logabsdet = [](const std::vector<array>& v, Device d) {
          return linalg::slogdet(v[0], d).second;
        };
        EXPECT_TRUE(same_on_devices(logabsdet, {a}, tol_of(dt))) << "slogdet";
      }
    }
  }
}

// |x| of each element, on the CPU, as doubles.
std::vector<double> magnitudes(const array& x) {
  return to_doubles(abs(x, Device::cpu));
}

// An identity batch shaped like the matrices x^T x of x (..., m, k).
std::vector<double> gram(const array& x) {
  return to_doubles(matmul(swapaxes(x, -1, -2), x, Device::cpu));
}
std::vector<double> eye_like_gram(const array& x) {
  Shape s = x.shape();
  int k = s.back();
  s[s.size() - 2] = k;
  return to_doubles(broadcast_to(eye(k), s));
}

// The SVD's values as the CPU's; U diag(S) V^T = A over the first k
// columns and rows; U and V orthogonal (signs are the library's).
void check_svd(const array& a, double t, const std::string& what) {
  auto values = [](const std::vector<array>& v, Device d) {
    return linalg::svd(v[0], false, d)[0];
  };
  EXPECT_TRUE(same_on_devices(values, {a}, t)) << what << " S";
  auto usv = linalg::svd(a, Device::gpu);
  eval(usv);
  // U diag(S) V^T over the first k columns and rows = A; U and V
  // orthogonal.
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  Shape uk = batch, vk = batch;
  uk.insert(uk.end(), {m, k});
  vk.insert(vk.end(), {k, n});
  array u = slice(usv[0], Shape(uk.size(), 0), uk);
  array vt = slice(usv[2], Shape(vk.size(), 0), vk);
  array us = multiply(u, expand_dims(usv[1], -2), Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(matmul(us, vt, Device::cpu)),
                        to_doubles(a), 0, t))
      << what << " U S V^T";
  EXPECT_TRUE(all_close(gram(usv[0]), eye_like_gram(usv[0]), 0, t))
      << what << " U";
  array v = swapaxes(usv[2], -1, -2);
  EXPECT_TRUE(all_close(gram(v), eye_like_gram(v), 0, t))
      << what << " V";
}

TEST_F(GpuLinalg, QrAndSvd) {
  for (Dtype dt : {float32, float64}) {
    double t = dt == float32 ? 1e-4 : 1e-10;
    // Up to 32 x 32 one gesvdjBatched call (a single matrix too); larger
    // ones a gesvdj each, or the host's for 20 matrices of 40 x 40.
    for (Shape shape : {Shape{3, 6, 6}, Shape{2, 9, 4}, Shape{2, 4, 9},
                        Shape{40, 12, 7}, Shape{20, 40, 40}, Shape{50, 33}}) {
      for (auto& [layout, a] : inputs_of(random_array(shape, dt, -1, 1))) {
        std::string what = dtype_name(dt) + " " + layout;
        auto [q, r] = linalg::qr(a, Device::gpu);
        auto [qc, rc] = linalg::qr(a, Device::cpu);
        eval({q, r});
        EXPECT_EQ(q.shape(), qc.shape()) << what;
        EXPECT_EQ(r.shape(), rc.shape()) << what;
        // Q R = A, Q^T Q = I, R upper, and R's rows as LAPACK's up to sign.
        EXPECT_TRUE(all_close(to_doubles(matmul(q, r, Device::cpu)),
                              to_doubles(a), 0, t))
            << what << " QR";
        EXPECT_TRUE(all_close(gram(q), eye_like_gram(q), 0, t)) << what;
        EXPECT_TRUE(all_close(to_doubles(r), to_doubles(triu(r, 0)), 0, 0))
            << what << " R upper";
        EXPECT_TRUE(all_close(magnitudes(r), magnitudes(rc), 0, t))
            << what << " |R|";
        check_svd(a, t, what);
      }
    }
  }
}

// Matrix i of a batch x (..., m, n) as a matrix of its own.
array matrix(const array& x, int i) {
  int m = x.shape(-2), n = x.shape(-1);
  return reshape(slice(x, Shape{i, 0, 0}, Shape{i + 1, m, n}), {m, n});
}

TEST_F(GpuLinalg, VectorsDoNotDependOnTheBatch) {
  // The signs of singular vectors and eigenvectors are the routine's
  // choice: a matrix alone gets the ones it gets in a batch (vmap against
  // a loop over the batch). Jacobi (batched) up to order 32, one call per
  // matrix above.
  for (Dtype dt : {float32, float64}) {
    double t = dt == float32 ? 1e-5 : 1e-12;
    for (Shape shape : {Shape{3, 5, 5}, Shape{3, 20, 12}, Shape{3, 40, 33}}) {
      array a = random_array(shape, dt, -1, 1);
      auto whole = linalg::svd(a, Device::gpu);
      for (int i = 0; i < 3; ++i) {
        auto alone = linalg::svd(matrix(a, i), Device::gpu);
        for (int k : {0, 2}) {
          EXPECT_TRUE(all_close(to_doubles(alone[k]),
                                to_doubles(matrix(whole[k], i)), t, t))
              << dtype_name(dt) << " " << detail::shape_str(shape)
              << " matrix " << i << (k == 0 ? " U" : " V^T");
        }
      }
    }
    for (int n : {6, 20, 40}) {
      array a = spd({3, n, n}, dt);
      array v = linalg::eigh(a, "L", Device::gpu).second;
      for (int i = 0; i < 3; ++i) {
        array alone = linalg::eigh(matrix(a, i), "L", Device::gpu).second;
        EXPECT_TRUE(all_close(to_doubles(alone), to_doubles(matrix(v, i)), t,
                              t))
            << dtype_name(dt) << " order " << n << " matrix " << i;
      }
    }
  }
}

#if KILN_HAS_CUDA
TEST_F(GpuLinalg, SvdFallsBackToQrIterations) {
  // With one sweep the Jacobi SVD does not converge on these matrices and
  // the batch is redone by gesvd. Larger than gesvdjBatched takes: that
  // one reports no failure to converge (after one sweep its info is 0 and
  // its values wrong), so batches of small matrices keep the default limit.
  struct Sweeps {
    Sweeps() { cuda::cusolver::set_gesvdj_max_sweeps(1); }
    ~Sweeps() { cuda::cusolver::set_gesvdj_max_sweeps(100); }
  } one_sweep;
  for (Dtype dt : {float32, float64}) {
    double t = dt == float32 ? 1e-4 : 1e-10;
    for (Shape shape : {Shape{2, 40, 40}, Shape{2, 45, 33}, Shape{33, 45}}) {
      check_svd(random_array(shape, dt, -1, 1), t, dtype_name(dt));
    }
  }
}
#endif

TEST_F(GpuLinalg, GeneralEigen) {
  // Eigenvalues as the CPU's up to order (each set sorted the same way);
  // eigenvectors by A V = V diag(w) and unit norm, complex pairs included
  // (random matrices have them).
  for (int n : {1, 5, 24}) {
    for (auto& [layout, a] : inputs_of(random_array({3, n, n}, float32))) {
      auto [w, v] = linalg::eig(a, Device::gpu);
      array wc = linalg::eigvals(a, Device::cpu);
      eval({w, v, wc});
      EXPECT_TRUE(all_close(to_doubles(real(sort(w, -1))),
                            to_doubles(real(sort(wc, -1))), 1e-4, 1e-4))
          << n << " " << layout;
      EXPECT_TRUE(all_close(to_doubles(imag(sort(w, -1))),
                            to_doubles(imag(sort(wc, -1))), 1e-4, 1e-4))
          << n << " " << layout;
      array ac = astype(a, complex64);
      array av = matmul(ac, v, Device::cpu);
      array vw = multiply(v, expand_dims(w, -2), Device::cpu);
      EXPECT_TRUE(all_close(to_doubles(real(av)), to_doubles(real(vw)), 0,
                            1e-3))
          << n << " " << layout;
      EXPECT_TRUE(all_close(to_doubles(imag(av)), to_doubles(imag(vw)), 0,
                            1e-3))
          << n << " " << layout;
      array norms = sum(square(abs(v)), -2);
      EXPECT_TRUE(all_close(to_doubles(norms),
                            std::vector<double>(3 * n, 1.0), 0, 1e-4));
    }
  }
}

// Runs f on the GPU and expects std::runtime_error whose message holds each
// of the parts.
void expect_failure(const std::function<array()>& f,
                    const std::vector<std::string>& parts) {
  try {
    eval(f());
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    for (auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << e.what() << " lacks " << p;
    }
  }
}

TEST_F(GpuLinalg, FailuresAsOnTheCpu) {
  // Matrix 1 of the batch is the bad one; the messages match the CPU's.
  array good = spd({1, 4, 4}, float32);
  array bad = negative(good);
  array batch = concatenate({good, bad, good}, 0);
  expect_failure(
      [&] { return linalg::cholesky(batch, false, Device::gpu); },
      {"[linalg::cholesky]", "not positive definite", "matrix 1 of the batch"});
  array singular = zeros({1, 4, 4}, float32);
  array sbatch = concatenate({good, singular}, 0);
  expect_failure([&] { return linalg::inv(sbatch, Device::gpu); },
                 {"[linalg::inv]", "singular", "matrix 1 of the batch"});
  expect_failure(
      [&] {
        return linalg::solve(sbatch, random_array({2, 4, 1}, float32),
                             Device::gpu);
      },
      {"[linalg::solve]", "singular", "matrix 1 of the batch"});
  expect_failure(
      [&] { return linalg::tri_inv(sbatch, false, Device::gpu); },
      {"[linalg::tri_inv]", "singular", "matrix 1 of the batch"});
  // Large triangular inverses run through trsm, their zero diagonals
  // found by a kernel: the first one is named, in either triangle.
  array big = shifted({2, 200, 200}, float32, 20);
  array zero = zeros({1, 1, 1}, float32);
  big = slice_update(big, zero, Shape{1, 170, 170}, Shape{2, 171, 171});
  big = slice_update(big, zero, Shape{1, 150, 150}, Shape{2, 151, 151});
  for (bool upper : {false, true}) {
    expect_failure(
        [&] { return linalg::tri_inv(big, upper, Device::gpu); },
        {"[linalg::tri_inv]", "diagonal entry 150 is zero",
         "matrix 1 of the batch"});
  }
  // Dtypes cuSOLVER does not take here raise as on the CPU.
  EXPECT_THROW(linalg::cholesky(astype(good, float16), false, Device::gpu),
               std::invalid_argument);
}

} // namespace
} // namespace kiln::test
