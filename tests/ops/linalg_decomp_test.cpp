// kiln::linalg decompositions and what is built on them (triangular
// inverses and solves, LU, determinants, eigendecompositions, pinv, cross),
// checked against float64 references by reconstruction on batched,
// transposed and sliced inputs, in float32 and float64; bad inputs raise.
#include <cmath>
#include <complex>

#include "linalg_helpers.h"

namespace kiln::test {
namespace {

double tol_of(Dtype dt) { return dt == float32 ? 3e-4 : 1e-9; }

// Random matrices made well-conditioned by adding shift to the diagonal.
array shifted(const Shape& shape, Dtype dt, double shift) {
  int n = shape.back();
  auto a = add(random_array(shape, dt, -1, 1),
               astype(multiply(eye(n), array(static_cast<float>(shift))), dt));
  a.eval();
  return a;
}

int batch_of(const Shape& s) {
  int b = 1;
  for (size_t i = 0; i + 2 < s.size(); ++i) b *= s[i];
  return b;
}

std::vector<double> eye_batch(int batch, int n) {
  std::vector<double> out;
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < n * n; ++i) out.push_back(i / n == i % n ? 1 : 0);
  }
  return out;
}

// The lower (or upper) triangle of each matrix, the rest zero.
std::vector<double> ref_triangle(std::vector<double> v, int batch, int n,
                                 bool upper) {
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (upper ? j < i : j > i) v[(b * n + i) * n + j] = 0;
      }
    }
  }
  return v;
}

// Determinant by Gaussian elimination with partial pivoting, in float64.
double ref_det(std::vector<double> a, int n) {
  double det = 1;
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
    }
    if (a[p * n + c] == 0) return 0;
    if (p != c) {
      for (int j = 0; j < n; ++j) std::swap(a[p * n + j], a[c * n + j]);
      det = -det;
    }
    det *= a[c * n + c];
    for (int r = c + 1; r < n; ++r) {
      double f = a[r * n + c] / a[c * n + c];
      for (int j = c; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
    }
  }
  return det;
}

std::vector<double> ref_dets(const std::vector<double>& a, int batch, int n) {
  std::vector<double> out;
  for (int b = 0; b < batch; ++b) {
    out.push_back(ref_det(
        std::vector<double>(a.begin() + b * n * n, a.begin() + (b + 1) * n * n),
        n));
  }
  return out;
}

std::vector<std::complex<double>> to_complex(const array& a) {
  auto c = contiguous(a);
  c.eval();
  std::vector<std::complex<double>> out;
  for (size_t i = 0; i < c.size(); ++i)
    out.emplace_back(c.data<complex64_t>()[i]);
  return out;
}

std::vector<array> layouts(const array& a) {
  return {a, as_transposed(a), sliced_copy(a)};
}

TEST(LinalgDecomp, TriInvInvertsTheTriangleRead) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{1, 1}, Shape{5, 5}, Shape{2, 3, 4, 4}}) {
      int n = shape.back(), b = batch_of(shape);
      auto a = shifted(shape, dt, 3);
      for (bool upper : {false, true}) {
        for (auto& x : layouts(a)) {
          auto t = ref_triangle(to_doubles(x), b, n, upper);
          auto xi = linalg::tri_inv(x, upper);
          EXPECT_EQ(xi.shape(), shape);
          EXPECT_EQ(xi.dtype(), dt);
          auto xv = to_doubles(xi);
          // the other triangle of the result is exactly zero
          EXPECT_EQ(ref_triangle(xv, b, n, upper), xv);
          EXPECT_TRUE(all_close(ref_batched_matmul(t, xv, b, n, n, n),
                                eye_batch(b, n), tol_of(dt), tol_of(dt)))
              << dt << " upper " << upper;
        }
      }
    }
  }
  array sing({1.0f, 0.0f, 2.0f, 0.0f}, {2, 2});
  EXPECT_THROW(linalg::tri_inv(sing).eval(), std::runtime_error);
  EXPECT_EQ(linalg::tri_inv(random_array({0, 3, 3}, float32)).shape(),
            (Shape{0, 3, 3}));
}

TEST(LinalgDecomp, CholeskyInvAndSolveTriangular) {
  for (Dtype dt : {float32, float64}) {
    int n = 4, b = 2;
    auto l = tril(shifted({b, n, n}, dt, 3));
    auto lv = to_doubles(l);
    auto a = ref_batched_matmul(lv, ref_transpose(lv, b, n, n), b, n, n, n);
    auto ai = to_doubles(linalg::cholesky_inv(l));
    EXPECT_TRUE(all_close(ref_batched_matmul(a, ai, b, n, n, n),
                          eye_batch(b, n), tol_of(dt), tol_of(dt)));
    // from the upper factor U = L^T: A = U^T U
    auto ui = to_doubles(linalg::cholesky_inv(swapaxes(l, -1, -2), true));
    EXPECT_TRUE(all_close(ui, ai, tol_of(dt), tol_of(dt)));

    auto full_a = shifted({b, n, n}, dt, 3);
    for (bool upper : {false, true}) {
      auto t = ref_triangle(to_doubles(full_a), b, n, upper);
      // (b, n, r) right-hand sides, broadcast and 1-d ones
      auto rhs = random_array({b, n, 3}, dt);
      for (auto& am : layouts(full_a)) {
        auto x = linalg::solve_triangular(am, as_transposed(rhs), upper);
        EXPECT_EQ(x.shape(), (Shape{b, n, 3}));
        EXPECT_TRUE(all_close(ref_batched_matmul(t, to_doubles(x), b, n, n, 3),
                              to_doubles(rhs), tol_of(dt), tol_of(dt)));
      }
      auto v = random_array({n}, dt);
      auto xv = linalg::solve_triangular(full_a, v, upper);
      EXPECT_EQ(xv.shape(), (Shape{b, n}));
      auto vv = to_doubles(v);
      std::vector<double> vb;
      for (int i = 0; i < b; ++i) vb.insert(vb.end(), vv.begin(), vv.end());
      EXPECT_TRUE(all_close(ref_batched_matmul(t, to_doubles(xv), b, n, n, 1),
                            vb, tol_of(dt), tol_of(dt)));
    }
  }
  auto a = random_array({3, 3}, float32);
  EXPECT_TRUE(throws_naming(
      [&] { linalg::solve_triangular(a, random_array({4}, float32)); },
      "linalg::solve_triangular"));
  EXPECT_TRUE(throws_naming([&] { linalg::solve_triangular(a, array(1.0f)); },
                            "linalg::solve_triangular"));
  EXPECT_TRUE(throws_naming(
      [&] {
        linalg::cholesky_inv(random_array({3, 4}, float32));
      },
      "linalg::cholesky_inv"));
}

TEST(LinalgDecomp, LuReconstructs) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape :
         {Shape{5, 5}, Shape{5, 3}, Shape{3, 5}, Shape{2, 4, 4}}) {
      int m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
      int b = batch_of(shape);
      auto a = random_array(shape, dt);
      for (auto& x : layouts(a)) {
        auto plu = linalg::lu(x);
        ASSERT_EQ(plu.size(), 3u);
        EXPECT_EQ(plu[0].dtype(), uint32);
        auto p = to_doubles(plu[0]), l = to_doubles(plu[1]),
             u = to_doubles(plu[2]);
        EXPECT_EQ(plu[1].shape().back(), k);
        EXPECT_EQ(plu[2].shape()[plu[2].ndim() - 2], k);
        auto lu_ = ref_batched_matmul(l, u, b, m, k, n);
        // a[i] = (L U)[p[i]]
        std::vector<double> rec;
        for (int bi = 0; bi < b; ++bi) {
          for (int i = 0; i < m; ++i) {
            int r = static_cast<int>(p[bi * m + i]);
            auto row = lu_.begin() + (bi * m + r) * n;
            rec.insert(rec.end(), row, row + n);
          }
        }
        EXPECT_TRUE(all_close(rec, to_doubles(x), tol_of(dt), tol_of(dt)))
            << dt << " " << shape.size();
        // |L| <= 1 below a unit diagonal (partial pivoting)
        for (int bi = 0; bi < b; ++bi) {
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < k; ++j) {
              double v = l[(bi * m + i) * k + j];
              if (i == j) EXPECT_EQ(v, 1.0);
              if (j > i) EXPECT_EQ(v, 0.0);
              if (j < i) EXPECT_LE(std::abs(v), 1.0 + 1e-6);
            }
          }
        }
        // lu_factor packs the same factors; pivots are row swaps
        auto [packed, piv] = linalg::lu_factor(x);
        EXPECT_EQ(piv.shape().back(), k);
        auto pv = to_doubles(packed);
        for (int bi = 0; bi < b; ++bi) {
          for (int i = 0; i < k; ++i) {
            for (int j = 0; j < n; ++j) {
              double want =
                  j >= i ? u[(bi * k + i) * n + j] : l[(bi * m + i) * k + j];
              EXPECT_NEAR(pv[(bi * m + i) * n + j], want, 1e-12);
            }
          }
        }
      }
    }
  }
}

TEST(LinalgDecomp, LuPivotsMatchMlx) {
  // From mlx.core.linalg.lu_factor / lu on this matrix (float32, CPU).
  array a({0.0f, 1.0f, 2.0f, 3.0f, 1.0f, 0.0f, 4.0f, 1.0f, 1.0f}, {3, 3});
  auto [packed, piv] = linalg::lu_factor(a);
  EXPECT_EQ(to_doubles(piv), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(to_doubles(linalg::lu(a)[0]), (std::vector<double>{1, 2, 0}));
}

TEST(LinalgDecomp, DetAndSlogdet) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{1, 1}, Shape{4, 4}, Shape{2, 3, 3}}) {
      int n = shape.back(), b = batch_of(shape);
      auto a = random_array(shape, dt);
      for (auto& x : layouts(a)) {
        auto want = ref_dets(to_doubles(x), b, n);
        auto d = linalg::det(x);
        EXPECT_EQ(d.dtype(), dt);
        EXPECT_EQ(d.size(), static_cast<size_t>(b));
        EXPECT_TRUE(all_close(to_doubles(d), want, tol_of(dt), tol_of(dt)));
        auto [sg, ld] = linalg::slogdet(x);
        auto sv = to_doubles(sg), lv = to_doubles(ld);
        for (int i = 0; i < b; ++i) {
          EXPECT_EQ(sv[i], want[i] > 0 ? 1.0 : -1.0);
          EXPECT_NEAR(lv[i], std::log(std::abs(want[i])), 10 * tol_of(dt));
        }
      }
    }
  }
  // integers are taken as float32; a singular matrix: det 0, slogdet (0, -inf)
  array s({1, 2, 2, 4}, {2, 2});
  EXPECT_EQ(linalg::det(s).dtype(), float32);
  EXPECT_EQ(to_doubles(linalg::det(s))[0], 0.0);
  auto [sg, ld] = linalg::slogdet(s);
  EXPECT_EQ(to_doubles(sg)[0], 0.0);
  EXPECT_EQ(to_doubles(ld)[0], -INFINITY);
  EXPECT_EQ(to_doubles(linalg::det(array({2, 1, 1, 3}, {2, 2})))[0], 5.0);
  EXPECT_TRUE(throws_naming(
      [] {
        linalg::det(random_array({2, 3}, float32));
      },
      "linalg::det"));
  EXPECT_TRUE(throws_naming([] { linalg::slogdet(random_array({3}, float32)); },
                            "linalg::slogdet"));
}

TEST(LinalgDecomp, EighReconstructs) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{1, 1}, Shape{5, 5}, Shape{2, 3, 3}}) {
      int n = shape.back(), b = batch_of(shape);
      auto r = random_array(shape, dt);
      for (bool upper : {false, true}) {
        for (auto& x : layouts(r)) {
          // the symmetric matrix the triangle read stands for
          auto t = ref_triangle(to_doubles(x), b, n, upper);
          auto sym = t;
          auto tt = ref_transpose(t, b, n, n);
          for (size_t i = 0; i < sym.size(); ++i) {
            int j = i % (n * n);
            sym[i] += j / n == j % n ? 0 : tt[i];
          }
          auto [w, v] = linalg::eigh(x, upper ? "U" : "L");
          EXPECT_EQ(w.shape().back(), n);
          auto wv = to_doubles(w), vv = to_doubles(v);
          EXPECT_TRUE(
              all_close(to_doubles(linalg::eigvalsh(x, upper ? "U" : "L")), wv,
                        tol_of(dt), tol_of(dt)));
          std::vector<double> vw(vv.size());
          for (size_t i = 0; i < vv.size(); ++i) {
            int bi = i / (n * n), c = i % n;
            vw[i] = vv[i] * wv[bi * n + c];
            if (c > 0) EXPECT_LE(wv[bi * n + c - 1], wv[bi * n + c]);
          }
          auto rec =
              ref_batched_matmul(vw, ref_transpose(vv, b, n, n), b, n, n, n);
          EXPECT_TRUE(all_close(rec, sym, 10 * tol_of(dt), 10 * tol_of(dt)))
              << dt << " upper " << upper;
          auto vtv =
              ref_batched_matmul(ref_transpose(vv, b, n, n), vv, b, n, n, n);
          EXPECT_TRUE(all_close(vtv, eye_batch(b, n), tol_of(dt), tol_of(dt)));
        }
      }
    }
  }
  EXPECT_TRUE(throws_naming(
      [] {
        linalg::eigh(random_array({3, 3}, float32), "X");
      },
      "linalg::eigh"));
  EXPECT_TRUE(throws_naming(
      [] {
        linalg::eigvalsh(random_array({3, 4}, float32));
      },
      "linalg::eigvalsh"));
}

TEST(LinalgDecomp, EigSatisfiesEigenEquation) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{1, 1}, Shape{5, 5}, Shape{2, 4, 4}}) {
      int n = shape.back(), b = batch_of(shape);
      auto a = random_array(shape, dt);
      for (auto& x : layouts(a)) {
        auto [w, v] = linalg::eig(x);
        EXPECT_EQ(w.dtype(), complex64);
        EXPECT_EQ(v.dtype(), complex64);
        auto av = to_doubles(x);
        auto wc = to_complex(w), vc = to_complex(v);
        auto w_only = to_complex(linalg::eigvals(x));
        for (int bi = 0; bi < b; ++bi) {
          for (int c = 0; c < n; ++c) {
            std::complex<double> lam = wc[bi * n + c];
            EXPECT_LT(std::abs(lam - w_only[bi * n + c]), 1e-4);
            double norm = 0, resid = 0;
            for (int i = 0; i < n; ++i) {
              std::complex<double> s = 0;
              for (int j = 0; j < n; ++j) {
                s += av[(bi * n + i) * n + j] * vc[(bi * n + j) * n + c];
              }
              std::complex<double> vi = vc[(bi * n + i) * n + c];
              resid = std::max(resid, std::abs(s - lam * vi));
              norm += std::norm(vi);
            }
            EXPECT_LT(resid, 1e-4); // eigenvectors are complex64
            EXPECT_NEAR(norm, 1.0, 1e-5);
          }
        }
      }
    }
  }
  // a rotation has the complex pair +-i
  auto w =
      to_complex(linalg::eigvals(array({0.0f, -1.0f, 1.0f, 0.0f}, {2, 2})));
  EXPECT_NEAR(std::abs(w[0].imag()), 1.0, 1e-6);
  EXPECT_NEAR(w[0].imag(), -w[1].imag(), 1e-6);
  EXPECT_TRUE(throws_naming(
      [] {
        linalg::eig(random_array({2, 3}, float32));
      },
      "linalg::eig"));
  EXPECT_TRUE(throws_naming(
      [] {
        linalg::eigvals(random_array({3, 3}, int32));
      },
      "linalg::eigvals"));
}

TEST(LinalgDecomp, PinvIsAGeneralizedInverse) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{5, 3}, Shape{3, 5}, Shape{2, 4, 4}}) {
      int m = shape[shape.size() - 2], n = shape.back(), b = batch_of(shape);
      auto a = random_array(shape, dt);
      for (auto& x : layouts(a)) {
        auto p = linalg::pinv(x);
        Shape ps = shape;
        std::swap(ps[ps.size() - 1], ps[ps.size() - 2]);
        EXPECT_EQ(p.shape(), ps);
        auto av = to_doubles(x), pv = to_doubles(p);
        auto apa = ref_batched_matmul(ref_batched_matmul(av, pv, b, m, n, m),
                                      av, b, m, m, n);
        EXPECT_TRUE(all_close(apa, av, 10 * tol_of(dt), 10 * tol_of(dt)));
        auto pap = ref_batched_matmul(ref_batched_matmul(pv, av, b, n, m, n),
                                      pv, b, n, n, m);
        EXPECT_TRUE(all_close(pap, pv, 10 * tol_of(dt), 10 * tol_of(dt)));
      }
    }
  }
  // empty maps have zero pseudo-inverses of the transposed shape
  EXPECT_EQ(linalg::pinv(random_array({3, 0}, float32)).shape(), (Shape{0, 3}));
  EXPECT_EQ(linalg::pinv(random_array({2, 0, 0}, float64)).shape(),
            (Shape{2, 0, 0}));
  // rank one: [[1, 2], [2, 4]] / 25
  auto p = to_doubles(linalg::pinv(array({1.0f, 2.0f, 2.0f, 4.0f}, {2, 2})));
  EXPECT_TRUE(all_close(p, {0.04, 0.08, 0.08, 0.16}, 1e-5, 1e-6));
}

TEST(LinalgDecomp, CrossProduct) {
  auto ref = [](const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> out;
    for (size_t i = 0; i < a.size(); i += 3) {
      out.push_back(a[i + 1] * b[i + 2] - a[i + 2] * b[i + 1]);
      out.push_back(a[i + 2] * b[i] - a[i] * b[i + 2]);
      out.push_back(a[i] * b[i + 1] - a[i + 1] * b[i]);
    }
    return out;
  };
  for (Dtype dt : {float32, float64, int32}) {
    auto a = random_array({4, 3}, dt), b = random_array({4, 3}, dt);
    auto want = ref(to_doubles(a), to_doubles(b));
    auto c = linalg::cross(a, b);
    EXPECT_EQ(c.dtype(), dt);
    EXPECT_TRUE(all_close(to_doubles(c), want, 1e-6, 1e-6)) << dt;
    // the vector axis first, on transposed views
    auto ct = linalg::cross(transpose(a), as_transposed(transpose(b)), 0);
    EXPECT_EQ(ct.shape(), (Shape{3, 4}));
    EXPECT_TRUE(all_close(to_doubles(transpose(ct)), want, 1e-6, 1e-6));
  }
  // broadcast, and 2-vectors taken with a zero z
  auto a = random_array({2, 1, 3}, float32), b = random_array({5, 3}, float32);
  EXPECT_EQ(linalg::cross(a, b).shape(), (Shape{2, 5, 3}));
  auto a2 = random_array({4, 2}, float32), b3 = random_array({4, 3}, float32);
  auto a3 = concatenate({a2, zeros({4, 1})}, -1);
  EXPECT_TRUE(all_close(to_doubles(linalg::cross(a2, b3)),
                        ref(to_doubles(a3), to_doubles(b3)), 1e-6, 1e-6));
  EXPECT_TRUE(throws_naming(
      [] {
        linalg::cross(random_array({4}, float32), random_array({4}, float32));
      },
      "linalg::cross"));
  EXPECT_TRUE(throws_naming(
      [] {
        linalg::cross(random_array({3}, float32), random_array({3}, float32),
                      1);
      },
      "linalg::cross"));
}

TEST(LinalgDecomp, BadDtypesAndShapes) {
  for (auto op : std::vector<std::pair<std::string, std::function<void()>>>{
           {"linalg::tri_inv",
            [] {
              linalg::tri_inv(random_array({3, 3}, int32));
            }},
           {"linalg::tri_inv",
            [] {
              linalg::tri_inv(random_array({3, 4}, float32));
            }},
           {"linalg::lu_factor",
            [] { linalg::lu_factor(random_array({3}, float32)); }},
           {"linalg::lu",
            [] {
              linalg::lu(random_array({3, 3}, float16));
            }},
           {"linalg::pinv", [] { linalg::pinv(random_array({3}, float32)); }},
       }) {
    EXPECT_TRUE(throws_naming(op.second, op.first));
  }
}

} // namespace
} // namespace kiln::test
