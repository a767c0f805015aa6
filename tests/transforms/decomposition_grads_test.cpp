// vjp / jvp / vmap rules of the triangular inverse, LU and eigh, and of the
// ops composed from them (det, slogdet, cholesky_inv, solve_triangular,
// pinv, cross), against finite differences, the jvp/vjp identity and a
// loop over batches. eig has vmap but no gradients (as MLX).
#include <cmath>

#include "kiln/ops/utils.h"
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

array rnd(const Shape& s, double lo = -1.5, double hi = 1.5) {
  return random_array(s, float64, lo, hi);
}

// Well-conditioned: a random matrix plus 3 I.
array shifted(const Shape& s) {
  auto a = add(rnd(s, -1, 1), multiply(eye(s.back(), s.back(), 0, float64),
                                       array(3.0, float64)));
  a.eval();
  return a;
}

ArrayFn one(std::function<array(const array&)> f) {
  return [f](const std::vector<array>& in) { return f(in[0]); };
}

TEST(GradDecomposition, TriInv) {
  for (bool upper : {false, true}) {
    std::string tag = upper ? " upper" : " lower";
    auto f = one([upper](auto& a) { return linalg::tri_inv(a, upper); });
    check_transforms("tri_inv" + tag, f, {shifted({4, 4})});
    check_transforms("tri_inv batched" + tag, f, {shifted({2, 3, 3})});
    check_transforms("tri_inv transposed" + tag, f,
                     {as_transposed(shifted({3, 3}))});
  }
  // the triangle not read gets no gradient
  auto g = to_doubles(grad([](const array& a) {
    return sum(sin(linalg::tri_inv(a)));
  })(shifted({3, 3})));
  EXPECT_EQ(g[1], 0.0);
  EXPECT_EQ(g[2], 0.0);
  EXPECT_EQ(g[5], 0.0);
  EXPECT_NE(g[3], 0.0);
}

TEST(GradDecomposition, SolveTriangularAndCholeskyInv) {
  for (bool upper : {false, true}) {
    std::string tag = upper ? " upper" : " lower";
    auto f = [upper](const std::vector<array>& in) {
      return linalg::solve_triangular(in[0], in[1], upper);
    };
    check_transforms("solve_triangular" + tag, f,
                     {shifted({3, 3}), rnd({3, 2})});
    check_transforms("solve_triangular batched vector" + tag, f,
                     {shifted({2, 3, 3}), rnd({3})});
    auto ci = one([upper](auto& a) { return linalg::cholesky_inv(a, upper); });
    check_transforms("cholesky_inv" + tag, ci, {shifted({3, 3})});
  }
}

TEST(GradDecomposition, LuFactor) {
  auto packed = one([](auto& a) { return linalg::lu_factor(a).first; });
  auto lower = one([](auto& a) { return linalg::lu(a)[1]; });
  auto upper = one([](auto& a) { return linalg::lu(a)[2]; });
  for (Shape s : {Shape{3, 3}, Shape{4, 4}, Shape{2, 3, 3}}) {
    auto a = rnd(s);
    check_transforms("lu_factor " + detail::shape_str(s), packed, {a});
    check_transforms("lu L " + detail::shape_str(s), lower, {a});
    check_transforms("lu U " + detail::shape_str(s), upper, {a});
  }
  check_transforms("lu_factor transposed", packed,
                   {as_transposed(rnd({4, 4}))});
  // the pivots and the permutation are batched by vmap too
  auto piv =
      one([](auto& a) { return astype(linalg::lu_factor(a).second, float64); });
  EXPECT_TRUE(check_vmap(piv, {rnd({3, 4, 4})}, {0}));
  EXPECT_TRUE(
      check_vmap(one([](auto& a) { return astype(linalg::lu(a)[0], float64); }),
                 {rnd({4, 3, 3})}, {1}));
  // tall and wide matrices: the extra rows of L or columns of U
  for (Shape sh : {Shape{5, 3}, Shape{3, 5}, Shape{2, 4, 2}, Shape{2, 2, 4}}) {
    check_transforms("lu_factor " + detail::shape_str(sh), packed, {rnd(sh)});
    check_transforms("lu L " + detail::shape_str(sh), lower, {rnd(sh)});
    check_transforms("lu U " + detail::shape_str(sh), upper, {rnd(sh)});
  }
}

TEST(GradDecomposition, DetAndSlogdet) {
  auto d = one([](auto& a) { return linalg::det(a); });
  auto ld = one([](auto& a) { return linalg::slogdet(a).second; });
  for (Shape s : {Shape{1, 1}, Shape{3, 3}, Shape{2, 4, 4}}) {
    check_transforms("det " + detail::shape_str(s), d, {rnd(s)});
    check_transforms("slogdet " + detail::shape_str(s), ld, {rnd(s)});
  }
  // d det(A) / dA = det(A) A^-T
  auto a = rnd({3, 3});
  auto g = grad([](const array& x) { return linalg::det(x); })(a);
  auto want = multiply(linalg::det(a), transpose(linalg::inv(a)));
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(want), 1e-10, 1e-10));
  // d log|det(A)| / dA = A^-T
  auto gl = grad([](const array& x) { return linalg::slogdet(x).second; })(a);
  EXPECT_TRUE(all_close(to_doubles(gl), to_doubles(transpose(linalg::inv(a))),
                        1e-10, 1e-10));
}

TEST(GradDecomposition, Eigh) {
  for (std::string uplo : {"L", "U"}) {
    auto w = one([uplo](auto& a) { return linalg::eigvalsh(a, uplo); });
    auto wv = one([uplo](auto& a) { return linalg::eigh(a, uplo).first; });
    auto v = one([uplo](auto& a) { return linalg::eigh(a, uplo).second; });
    // V V^T-type functions do not depend on the eigenvectors' signs
    auto vv = one([uplo](auto& a) {
      auto [e, vec] = linalg::eigh(a, uplo);
      return matmul(multiply(vec, expand_dims(exp(e), -2)), transpose(vec));
    });
    for (Shape s : {Shape{3, 3}, Shape{2, 4, 4}}) {
      auto a = rnd(s);
      std::string tag = " " + uplo + " " + detail::shape_str(s);
      check_transforms("eigvalsh" + tag, w, {a});
      check_transforms("eigh w" + tag, wv, {a});
      check_transforms("eigh V" + tag, v, {a});
    }
    check_transforms("eigh V exp(w) V^T " + uplo, vv, {rnd({3, 3})});
    check_transforms("eigh transposed " + uplo, v,
                     {as_transposed(rnd({3, 3}))});
  }
  // through a symmetric construction, each eigenvalue's gradient is
  // v_i v_i^T (here summed: the identity, as sum w = trace)
  auto g = grad([](const array& x) { return sum(linalg::eigvalsh(x)); })(
      rnd({3, 3}));
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(eye(3, 3, 0, float64)), 1e-10,
                        1e-10));
}

TEST(GradDecomposition, Composed) {
  auto p = one([](auto& a) { return linalg::pinv(a); });
  for (Shape s : {Shape{3, 3}, Shape{4, 2}, Shape{2, 2, 3}}) {
    check_transforms("pinv " + detail::shape_str(s), p, {rnd(s)});
  }
  auto c = [](const std::vector<array>& in) {
    return linalg::cross(in[0], in[1]);
  };
  check_transforms("cross", c, {rnd({4, 3}), rnd({4, 3})});
  check_transforms("cross broadcast 2-vector", c, {rnd({4, 2}), rnd({3})});
  check_transforms("cross axis 0",
                   [](const std::vector<array>& in) {
                     return linalg::cross(in[0], in[1], 0);
                   },
                   {rnd({3, 2}), rnd({3, 2})});
}

TEST(GradDecomposition, EigVmapOnly) {
  auto a = rnd({3, 4, 4});
  auto w = vmap(
      [](const std::vector<array>& in) {
        return std::vector<array>{linalg::eigvals(in[0])};
      },
      {0})({a})[0];
  auto w_direct = linalg::eigvals(a);
  EXPECT_TRUE(all_close(to_doubles(w), to_doubles(w_direct), 1e-6, 1e-6));
  auto b = rnd({4, 4, 3});
  auto v = vmap(
      [](const std::vector<array>& in) {
        return std::vector<array>{linalg::eig(in[0]).second};
      },
      {2})({b})[0];
  EXPECT_TRUE(all_close(to_doubles(v),
                        to_doubles(linalg::eig(moveaxis(b, 2, 0)).second), 1e-6,
                        1e-6));
  EXPECT_THROW(grad([](const array& x) {
                 return sum(abs(linalg::eigvals(x)));
               })(rnd({3, 3})),
               std::invalid_argument);
}

} // namespace
} // namespace kiln::test
