// linalg::norm against float64 loops: vector ords, matrix ords (2, -2, nuc
// from the closed-form singular values of 2x2 matrices, and NumPy's values
// for two larger matrices), axes, keepdims and dtypes.
#include <cmath>
#include <limits>

#include "linalg_helpers.h"

namespace kiln::test {
namespace {

using linalg::norm;
constexpr double inf = std::numeric_limits<double>::infinity();

double ref_vector_norm(const std::vector<double>& v, double ord) {
  double acc = 0;
  if (ord == inf || ord == -inf) {
    acc = ord > 0 ? 0 : inf;
    for (double x : v) {
      acc = ord > 0 ? std::max(acc, std::abs(x)) : std::min(acc, std::abs(x));
    }
    return acc;
  }
  if (ord == 0) {
    for (double x : v) acc += x != 0;
    return acc;
  }
  for (double x : v) acc += std::pow(std::abs(x), ord);
  return std::pow(acc, 1 / ord);
}

TEST(Norm, VectorOrds) {
  for (Dtype dt : {float32, float64, float16}) {
    auto x = random_array({7}, dt);
    auto v = to_doubles(x);
    for (double ord : {2.0, 1.0, 0.0, 3.0, 0.5, -1.0, inf, -inf}) {
      for (auto& xv : {x, sliced_copy(x), reversed(x, 0)}) {
        auto n = norm(xv, ord);
        EXPECT_EQ(n.dtype(), dt);
        EXPECT_EQ(n.shape(), Shape{});
        double want = ref_vector_norm(to_doubles(xv), ord);
        double tol = dt == float16 ? 4e-3 : tolerance(dt) * 10;
        EXPECT_TRUE(all_close(to_doubles(n), {want}, tol, tol))
            << dt << " ord " << ord;
      }
    }
    (void)v;
  }
  // Zeros count as zero for ord 0 and do not break negative ords.
  auto z = array({0.0f, 2.0f, 0.0f, -3.0f});
  EXPECT_EQ(to_doubles(norm(z, 0.0)), (std::vector<double>{2}));
  EXPECT_EQ(to_doubles(norm(z, -1.0)), (std::vector<double>{0}));
}

TEST(Norm, DefaultIsFlattened2Norm) {
  auto x = random_array({2, 3, 4}, float32);
  auto v = to_doubles(x);
  EXPECT_TRUE(all_close(to_doubles(norm(x)), {ref_vector_norm(v, 2)}, 1e-6, 0));
  EXPECT_TRUE(all_close(to_doubles(norm(as_transposed(x))),
                        {ref_vector_norm(v, 2)}, 1e-6, 0));
  auto k = norm(x, std::nullopt, true);
  EXPECT_EQ(k.shape(), (Shape{1, 1, 1}));
  EXPECT_TRUE(all_close(to_doubles(norm(array(-2.5f))), {2.5}, 0, 0));
  // Integers become float32, complex numbers their magnitude.
  auto i = norm(array({3, 4}));
  EXPECT_EQ(i.dtype(), float32);
  EXPECT_EQ(to_doubles(i), (std::vector<double>{5}));
  std::vector<complex64_t> cv{{3, 4}, {0, 12}};
  auto c = norm(array(cv, {2}, complex64));
  EXPECT_EQ(c.dtype(), float32);
  EXPECT_TRUE(all_close(to_doubles(c), {13}, 1e-6, 0));
  EXPECT_TRUE(all_close(to_doubles(norm(array(cv, {2}, complex64), 1.0)), {17},
                        1e-6, 0));
  EXPECT_EQ(to_doubles(norm(random_array({0, 3}, float32))),
            (std::vector<double>{0}));
}

TEST(Norm, VectorNormsAlongAnAxis) {
  auto x = random_array({3, 5}, float64);
  auto v = to_doubles(x);
  for (double ord : {2.0, 1.0, inf, 3.0}) {
    auto n = norm(x, ord, 1);
    EXPECT_EQ(n.shape(), (Shape{3}));
    std::vector<double> want;
    for (int i = 0; i < 3; ++i) {
      want.push_back(
          ref_vector_norm({v.begin() + 5 * i, v.begin() + 5 * i + 5}, ord));
    }
    EXPECT_TRUE(all_close(to_doubles(n), want, 1e-12, 1e-12)) << ord;
    auto k = norm(x, ord, std::vector<int>{-1}, true);
    EXPECT_EQ(k.shape(), (Shape{3, 1}));
    EXPECT_TRUE(all_close(to_doubles(k), want, 1e-12, 1e-12));
  }
  auto cols = norm(x, 0);
  EXPECT_EQ(cols.shape(), (Shape{5}));
  for (int j = 0; j < 5; ++j) {
    double want = ref_vector_norm({v[j], v[5 + j], v[10 + j]}, 2);
    EXPECT_NEAR(to_doubles(cols)[j], want, 1e-12);
  }
}

// Singular values of a 2x2 matrix from the eigenvalues of A^T A.
std::pair<double, double> singular_2x2(const double* a) {
  double f = a[0] * a[0] + a[1] * a[1] + a[2] * a[2] + a[3] * a[3];
  double det = a[0] * a[3] - a[1] * a[2];
  double disc = std::sqrt(std::max(0.0, f * f - 4 * det * det));
  return {std::sqrt((f + disc) / 2), std::sqrt(std::max(0.0, (f - disc) / 2))};
}

TEST(Norm, MatrixOrdsOnBatched2x2) {
  for (Dtype dt : {float32, float64}) {
    auto x = random_array({4, 2, 2}, dt);
    auto v = to_doubles(x);
    double tol = dt == float32 ? 1e-5 : 1e-12;
    for (auto& xv : {x, as_transposed(x)}) {
      auto vals = to_doubles(xv);
      std::vector<double> two, mtwo, nuc, fro, one, mone, rinf, rminf;
      for (int b = 0; b < 4; ++b) {
        const double* m = &vals[4 * b];
        auto [s1, s2] = singular_2x2(m);
        two.push_back(s1);
        mtwo.push_back(s2);
        nuc.push_back(s1 + s2);
        fro.push_back(
            std::sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2] + m[3] * m[3]));
        double c0 = std::abs(m[0]) + std::abs(m[2]);
        double c1 = std::abs(m[1]) + std::abs(m[3]);
        double r0 = std::abs(m[0]) + std::abs(m[1]);
        double r1 = std::abs(m[2]) + std::abs(m[3]);
        one.push_back(std::max(c0, c1));
        mone.push_back(std::min(c0, c1));
        rinf.push_back(std::max(r0, r1));
        rminf.push_back(std::min(r0, r1));
      }
      std::vector<int> ax{1, 2};
      EXPECT_TRUE(all_close(to_doubles(norm(xv, 2.0, ax)), two, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, -2.0, ax)), mtwo, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, "nuc", ax)), nuc, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, "fro", ax)), fro, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, ax)), fro, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, 1.0, ax)), one, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, -1.0, ax)), mone, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, inf, ax)), rinf, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, -inf, ax)), rminf, tol, tol));
      // Swapping the axes swaps rows and columns.
      std::vector<int> rev{2, 1};
      EXPECT_TRUE(all_close(to_doubles(norm(xv, 1.0, rev)), rinf, tol, tol));
      EXPECT_TRUE(all_close(to_doubles(norm(xv, inf, rev)), one, tol, tol));
    }
    auto k = norm(x, 2.0, std::vector<int>{0, 2}, true);
    EXPECT_EQ(k.shape(), (Shape{1, 2, 1}));
    EXPECT_EQ(norm(x, "nuc", std::vector<int>{2, 0}, true).shape(),
              (Shape{1, 2, 1}));
    EXPECT_EQ(norm(x, 1.0, std::vector<int>{0, 2}, true).shape(),
              (Shape{1, 2, 1}));
  }
}

TEST(Norm, MatrixOrdsMatchNumPy) {
  // Expected values computed with numpy.linalg.norm.
  array m({2.0f, -1.0f, 0.5f, 1.0f, 3.0f, -2.0f, 0.0f, 1.0f, 4.0f}, {3, 3});
  EXPECT_NEAR(norm(m, 2.0).item<float>(), 4.57985650559311, 1e-5);
  EXPECT_NEAR(norm(m, -2.0).item<float>(), 2.1940232729450635, 1e-5);
  EXPECT_NEAR(norm(m, "nuc").item<float>(), 10.008253947670728, 1e-5);
  array r({1.0, 2.0, 3.0, 4.0, 0.0, -1.0, 2.0, 5.0, 3.0, 3.0, -3.0, 1.0},
          {3, 4}, float64);
  EXPECT_NEAR(norm(r, 2.0).item<double>(), 7.348469228349534, 1e-12);
  EXPECT_NEAR(norm(r, -2.0).item<double>(), 2.151902210405254, 1e-12);
  EXPECT_NEAR(norm(transpose(r), "nuc").item<double>(), 14.919717974717678,
              1e-12);
}

TEST(Norm, BadInputs) {
  auto x = random_array({2, 3, 4}, float32);
  auto m = random_array({3, 3}, float32);
  const char* op = "linalg::norm";
  EXPECT_TRUE(throws_naming([&] { norm(x, std::vector<int>{0, 1, 2}); }, op));
  EXPECT_TRUE(throws_naming([&] { norm(x, 2.0); }, op)); // ord, 3-d, no axis
  EXPECT_TRUE(throws_naming([&] { norm(array(2.0f), 1.0); }, op));
  EXPECT_TRUE(
      throws_naming([&] { norm(random_array({3}, float32), "fro"); }, op));
  EXPECT_TRUE(throws_naming([&] { norm(m, "abc"); }, op));
  EXPECT_TRUE(throws_naming([&] { norm(m, 3.0); }, op));
  EXPECT_TRUE(throws_naming([&] { norm(m, 1.0, std::vector<int>{1, 1}); }, op));
  EXPECT_TRUE(throws_naming([&] { norm(m, 1.0, std::vector<int>{0, 5}); }, op));
  // The SVD-based norms need float32 or float64 (as MLX).
  EXPECT_TRUE(
      throws_naming([&] { norm(astype(m, float16), 2.0); }, "linalg::svd"));
}

} // namespace
} // namespace kiln::test
