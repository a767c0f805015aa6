// kiln::linalg factorizations checked by reconstruction in float64 (Q R = A,
// U S Vt = A, A inv(A) = I, L L^T = A, A x = b), on batched, transposed and
// sliced inputs; singular inputs raise.
#include <cmath>

#include "linalg_helpers.h"

namespace kiln::test {
namespace {

using linalg::cholesky;
using linalg::inv;
using linalg::qr;
using linalg::solve;
using linalg::svd;

double tol_of(Dtype dt) { return dt == float32 ? 2e-4 : 1e-10; }

// Random matrices made well-conditioned by adding shift to the diagonal.
array well_conditioned(const Shape& shape, Dtype dt, double shift) {
  int n = shape.back();
  auto a = add(random_array(shape, dt, -1, 1),
               astype(multiply(eye(n), array(static_cast<float>(shift))), dt));
  a.eval();
  return a;
}

int batch_of(const array& a) {
  int mn = a.shape(-1) * a.shape(-2);
  return mn == 0 ? 0 : static_cast<int>(a.size() / mn);
}

std::vector<double> eye_batch(int batch, int n) {
  std::vector<double> out;
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < n * n; ++i) out.push_back(i / n == i % n ? 1 : 0);
  }
  return out;
}

// The same matrices in other layouts: column-major and column-sliced.
std::vector<array> layouts(const array& a) {
  return {a, as_transposed(a), sliced_copy(a)};
}

// Values of the upper (or lower) triangle outside the diagonal band.
double off_triangle_max(const std::vector<double>& v, int batch, int r, int c,
                        bool upper) {
  double worst = 0;
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < r; ++i) {
      for (int j = 0; j < c; ++j) {
        bool outside = upper ? j < i : j > i;
        if (outside) worst = std::max(worst, std::abs(v[(b * r + i) * c + j]));
      }
    }
  }
  return worst;
}

TEST(Linalg, InverseTimesMatrixIsIdentity) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{1, 1}, Shape{4, 4}, Shape{3, 5, 5}}) {
      auto a = well_conditioned(shape, dt, 4);
      for (auto& x : layouts(a)) {
        auto ai = inv(x);
        EXPECT_EQ(ai.dtype(), dt);
        EXPECT_EQ(ai.shape(), shape);
        int n = shape.back(), b = batch_of(a);
        auto prod =
            ref_batched_matmul(to_doubles(x), to_doubles(ai), b, n, n, n);
        EXPECT_TRUE(all_close(prod, eye_batch(b, n), tol_of(dt), tol_of(dt)))
            << dt << " ndim " << shape.size();
      }
    }
  }
  EXPECT_EQ(inv(random_array({0, 3, 3}, float32)).shape(), (Shape{0, 3, 3}));
  EXPECT_EQ(inv(random_array({0, 0}, float32)).size(), 0u);
}

TEST(Linalg, CholeskyReconstructs) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{4, 4}, Shape{2, 3, 3}}) {
      int n = shape.back(), b = batch_of(random_array(shape, dt));
      // A = B B^T + n I is symmetric positive definite.
      auto bm = random_array(shape, dt, -1, 1);
      auto bv = to_doubles(bm);
      auto av = ref_batched_matmul(bv, ref_transpose(bv, b, n, n), b, n, n, n);
      for (int k = 0; k < b; ++k) {
        for (int i = 0; i < n; ++i) av[(k * n + i) * n + i] += n;
      }
      array a(av.begin(), shape, dt);
      for (auto& x : layouts(a)) {
        auto l = to_doubles(cholesky(x));
        EXPECT_EQ(off_triangle_max(l, b, n, n, false), 0.0);
        auto llt = ref_batched_matmul(l, ref_transpose(l, b, n, n), b, n, n, n);
        EXPECT_TRUE(all_close(llt, to_doubles(x), tol_of(dt), tol_of(dt)));
        auto u = to_doubles(cholesky(x, true));
        EXPECT_EQ(off_triangle_max(u, b, n, n, true), 0.0);
        auto utu = ref_batched_matmul(ref_transpose(u, b, n, n), u, b, n, n, n);
        EXPECT_TRUE(all_close(utu, to_doubles(x), tol_of(dt), tol_of(dt)));
      }
    }
  }
}

TEST(Linalg, CholeskyReadsOneTriangle) {
  // Values from mlx.core.linalg.cholesky: the lower factor reads only the
  // lower triangle, the upper factor only the upper one.
  array a({4.0f, 100.0f, 2.0f, 3.0f}, {2, 2});
  EXPECT_TRUE(all_close(to_doubles(cholesky(a)), {2, 0, 1, std::sqrt(2.0)},
                        1e-6, 1e-6));
  array b({4.0f, 2.0f, 100.0f, 3.0f}, {2, 2});
  EXPECT_TRUE(all_close(to_doubles(cholesky(b, true)),
                        {2, 1, 0, std::sqrt(2.0)}, 1e-6, 1e-6));
}

TEST(Linalg, QrReconstructsWithOrthonormalQ) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape :
         {Shape{5, 3}, Shape{3, 5}, Shape{4, 4}, Shape{2, 6, 4}}) {
      auto a = random_array(shape, dt);
      int m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
      int b = batch_of(a);
      for (auto& x : layouts(a)) {
        auto [q, r] = qr(x);
        Shape qs = shape, rs = shape;
        qs.back() = k;
        rs[rs.size() - 2] = k;
        ASSERT_EQ(q.shape(), qs);
        ASSERT_EQ(r.shape(), rs);
        auto qv = to_doubles(q), rv = to_doubles(r);
        EXPECT_EQ(off_triangle_max(rv, b, k, n, true), 0.0);
        auto qtq =
            ref_batched_matmul(ref_transpose(qv, b, m, k), qv, b, k, m, k);
        EXPECT_TRUE(all_close(qtq, eye_batch(b, k), tol_of(dt), tol_of(dt)));
        auto qr_ = ref_batched_matmul(qv, rv, b, m, k, n);
        EXPECT_TRUE(all_close(qr_, to_doubles(x), tol_of(dt), tol_of(dt)));
      }
    }
  }
}

TEST(Linalg, SvdReconstructs) {
  for (Dtype dt : {float32, float64}) {
    for (const Shape& shape : {Shape{5, 3}, Shape{3, 5}, Shape{2, 4, 4}}) {
      auto a = random_array(shape, dt);
      int m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
      int b = batch_of(a);
      for (auto& x : layouts(a)) {
        auto usv = svd(x);
        ASSERT_EQ(usv.size(), 3u);
        auto u = to_doubles(usv[0]), s = to_doubles(usv[1]);
        auto vt = to_doubles(usv[2]);
        EXPECT_EQ(usv[1].shape().back(), k);
        auto utu = ref_batched_matmul(ref_transpose(u, b, m, m), u, b, m, m, m);
        EXPECT_TRUE(all_close(utu, eye_batch(b, m), tol_of(dt), tol_of(dt)));
        auto vvt =
            ref_batched_matmul(vt, ref_transpose(vt, b, n, n), b, n, n, n);
        EXPECT_TRUE(all_close(vvt, eye_batch(b, n), tol_of(dt), tol_of(dt)));
        // U[:, :k] diag(S) Vt[:k, :] == A, singular values descending.
        std::vector<double> rec(static_cast<size_t>(b) * m * n, 0.0);
        for (int bi = 0; bi < b; ++bi) {
          for (int p = 0; p < k; ++p) {
            double sv = s[bi * k + p];
            EXPECT_GE(sv, 0.0);
            if (p > 0) EXPECT_LE(sv, s[bi * k + p - 1]);
            for (int i = 0; i < m; ++i) {
              for (int j = 0; j < n; ++j) {
                rec[(bi * m + i) * n + j] +=
                    u[(bi * m + i) * m + p] * sv * vt[(bi * n + p) * n + j];
              }
            }
          }
        }
        EXPECT_TRUE(all_close(rec, to_doubles(x), tol_of(dt), tol_of(dt)));
        auto s_only = svd(x, false);
        ASSERT_EQ(s_only.size(), 1u);
        EXPECT_TRUE(
            all_close(to_doubles(s_only[0]), s, tol_of(dt), tol_of(dt)));
      }
    }
  }
  // Nothing to factor: identities for U and Vt, no singular values.
  auto e = svd(random_array({0, 2}, float32));
  EXPECT_EQ(e[0].shape(), (Shape{0, 0}));
  EXPECT_EQ(e[1].shape(), (Shape{0}));
  EXPECT_EQ(to_doubles(e[2]), (std::vector<double>{1, 0, 0, 1}));
}

TEST(Linalg, SolveSatisfiesSystem) {
  for (Dtype dt : {float32, float64}) {
    auto a = well_conditioned({4, 4}, dt, 4);
    auto check = [&](const array& x, const array& am, const array& bm,
                     int batch, int r) {
      auto ax =
          ref_batched_matmul(to_doubles(am), to_doubles(x), batch, 4, 4, r);
      EXPECT_TRUE(all_close(ax, to_doubles(bm), tol_of(dt), tol_of(dt))) << dt;
    };
    for (auto& am : layouts(a)) {
      auto bv = random_array({4}, dt);
      auto x = solve(am, bv);
      EXPECT_EQ(x.shape(), (Shape{4}));
      check(x, am, bv, 1, 1);
      auto bm = random_array({4, 3}, dt);
      check(solve(am, as_transposed(bm)), am, bm, 1, 3);
    }
    // Batched a with a broadcast b, and a 1-d b over a's batch.
    auto ab = well_conditioned({3, 4, 4}, dt, 4);
    auto b2 = random_array({4, 2}, dt);
    auto x = solve(ab, b2);
    EXPECT_EQ(x.shape(), (Shape{3, 4, 2}));
    check(x, ab, broadcast_to(b2, {3, 4, 2}), 3, 2);
    auto b1 = random_array({4}, dt);
    auto x1 = solve(ab, b1);
    EXPECT_EQ(x1.shape(), (Shape{3, 4}));
    check(x1, ab, broadcast_to(b1, {3, 4}), 3, 1);
    auto xb = solve(a, random_array({2, 1, 4, 3}, dt));
    EXPECT_EQ(xb.shape(), (Shape{2, 1, 4, 3}));
  }
  // An integer b promotes to a's dtype.
  auto x =
      solve(well_conditioned({3, 3}, float32, 3), random_array({3}, int32));
  EXPECT_EQ(x.dtype(), float32);
}

TEST(Linalg, SingularInputsRaise) {
  array sing({1.0f, 2.0f, 2.0f, 4.0f}, {2, 2});
  auto expect_runtime = [](auto fn, const std::string& op) {
    try {
      fn();
      ADD_FAILURE() << op << " did not raise";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("[" + op + "]"), std::string::npos)
          << e.what();
    }
  };
  expect_runtime([&] { inv(sing).eval(); }, "linalg::inv");
  expect_runtime(
      [&] {
        solve(sing, array({1.0f, 1.0f})).eval();
      },
      "linalg::solve");
  // MLX returns garbage for a matrix that is not positive definite.
  expect_runtime(
      [&] {
        cholesky(array({1.0f, 2.0f, 2.0f, 1.0f}, {2, 2})).eval();
      },
      "linalg::cholesky");
  // One bad matrix in a batch is enough.
  auto batch = broadcast_to(sing, {3, 2, 2});
  expect_runtime([&] { inv(batch).eval(); }, "linalg::inv");
}

TEST(Linalg, BadInputs) {
  auto sq = random_array({3, 3}, float32);
  for (auto op : {"linalg::inv", "linalg::cholesky"}) {
    auto f = [&](const array& x) {
      return std::string(op) == "linalg::inv" ? inv(x) : cholesky(x);
    };
    EXPECT_TRUE(throws_naming([&] { f(random_array({3, 3}, int32)); }, op));
    EXPECT_TRUE(throws_naming([&] { f(random_array({3, 3}, float16)); }, op));
    EXPECT_TRUE(throws_naming([&] { f(random_array({2, 3}, float32)); }, op));
    EXPECT_TRUE(throws_naming([&] { f(random_array({3}, float32)); }, op));
  }
  EXPECT_TRUE(
      throws_naming([&] { qr(random_array({3}, float32)); }, "linalg::qr"));
  EXPECT_TRUE(throws_naming(
      [&] {
        qr(random_array({3, 2}, bfloat16));
      },
      "linalg::qr"));
  EXPECT_TRUE(
      throws_naming([&] { svd(random_array({3}, float32)); }, "linalg::svd"));
  EXPECT_TRUE(throws_naming(
      [&] {
        svd(random_array({3, 3}, int32));
      },
      "linalg::svd"));
  EXPECT_TRUE(throws_naming([&] { solve(sq, random_array({4}, float32)); },
                            "linalg::solve"));
  EXPECT_TRUE(throws_naming(
      [&] {
        solve(random_array({2, 3}, float32), random_array({2}, float32));
      },
      "linalg::solve"));
  EXPECT_TRUE(throws_naming(
      [&] {
        solve(random_array({3, 3}, float16), random_array({3}, float16));
      },
      "linalg::solve"));
  EXPECT_TRUE(throws_naming(
      [&] {
        solve(random_array({2, 3, 3}, float32),
              random_array({4, 3, 1}, float32));
      },
      "linalg::solve"));
  EXPECT_TRUE(throws_naming([&] { solve(sq, array(1.0f)); }, "linalg::solve"));
}

} // namespace
} // namespace kiln::test
