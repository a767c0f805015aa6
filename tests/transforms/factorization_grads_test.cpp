// vjp / jvp / vmap rules of the factorizations (Cholesky, QR, SVD), checked
// against finite differences, the jvp/vjp identity and a loop over batches.
#include <cmath>

#include "kiln/ops/utils.h"
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

array rnd(const Shape& s, double lo = -1.5, double hi = 1.5) {
  return random_array(s, float64, lo, hi);
}

// A symmetric positive definite stack: x x^T + n I.
array spd(const Shape& s) {
  auto x = rnd(s, -1, 1);
  auto a = add(matmul(x, swapaxes(x, -1, -2)),
               multiply(eye(s.back(), s.back(), 0, float64),
                        array(double(s.back()), float64)));
  a.eval();
  return a;
}

ArrayFn one(std::function<array(const array&)> f) {
  return [f](const std::vector<array>& in) { return f(in[0]); };
}

TEST(GradCholesky, Rules) {
  for (bool upper : {false, true}) {
    std::string tag = upper ? " upper" : " lower";
    auto f = one([upper](auto& a) { return linalg::cholesky(a, upper); });
    // perturbing single entries: only the triangle that is read matters
    check_transforms("cholesky" + tag, f, {spd({3, 3})});
    check_transforms("cholesky batched" + tag, f, {spd({2, 4, 4})});
    check_transforms("cholesky transposed" + tag, f,
                     {as_transposed(spd({3, 3}))});
    // through a symmetric construction
    check_transforms("cholesky of x x^T" + tag, one([upper](auto& x) {
                       auto a =
                           add(matmul(x, transpose(x)), eye(3, 3, 0, float64));
                       return linalg::cholesky(a, upper);
                     }),
                     {rnd({3, 3})});
  }
  // the entries that are not read get no gradient
  auto g = grad([](const array& a) { return sum(sin(linalg::cholesky(a))); })(
      spd({3, 3}));
  auto gv = to_doubles(g);
  EXPECT_EQ(gv[1], 0.0);
  EXPECT_EQ(gv[2], 0.0);
  EXPECT_EQ(gv[5], 0.0);
  EXPECT_NE(gv[3], 0.0);
}

TEST(GradQR, Rules) {
  auto q = one([](auto& a) { return linalg::qr(a).first; });
  auto r = one([](auto& a) { return linalg::qr(a).second; });
  struct Case {
    const char* name;
    Shape shape;
  };
  for (auto c :
       {Case{"tall", {4, 3}}, Case{"square", {3, 3}}, Case{"wide", {3, 5}},
        Case{"batched", {2, 4, 2}}, Case{"batched wide", {2, 2, 3}}}) {
    auto a = rnd(c.shape);
    check_transforms(std::string("qr Q ") + c.name, q, {a});
    check_transforms(std::string("qr R ") + c.name, r, {a});
  }
  check_transforms("qr transposed", q, {as_transposed(rnd({4, 3}))});
  check_transforms("qr both", one([](auto& a) {
                     auto [qq, rr] = linalg::qr(a);
                     return add(matmul(qq, rr), multiply(qq, qq));
                   }),
                   {rnd({4, 3})});
}

TEST(GradSVD, SingularValues) {
  auto sv = one([](auto& a) { return linalg::svd(a, false)[0]; });
  auto sv_uv = one([](auto& a) { return linalg::svd(a)[1]; });
  for (Shape s : {Shape{3, 3}, Shape{4, 2}, Shape{2, 5}, Shape{2, 3, 4}}) {
    auto a = rnd(s);
    check_transforms("svd S " + detail::shape_str(s), sv, {a});
    check_transforms("svd (uv) S " + detail::shape_str(s), sv_uv, {a});
  }
  check_transforms("svd S transposed", sv, {as_transposed(rnd({3, 4}))});
  // d s_i / dA = u_i v_i^T: the nuclear norm's gradient is U V^T, which is
  // the identity at a symmetric positive definite matrix.
  auto g =
      grad([](const array& a) { return linalg::norm(a, "nuc"); })(spd({3, 3}));
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(eye(3, 3, 0, float64)), 1e-10,
                        1e-10));
  check_transforms("norm 2", one([](auto& a) { return linalg::norm(a, 2.0); }),
                   {rnd({3, 4})});
}

TEST(GradSVD, SingularVectors) {
  auto u = one([](auto& a) { return linalg::svd(a)[0]; });
  auto vt = one([](auto& a) { return linalg::svd(a)[2]; });
  for (Shape s : {Shape{3, 3}, Shape{2, 3, 3}}) {
    auto a = rnd(s);
    check_transforms("svd U " + detail::shape_str(s), u, {a});
    check_transforms("svd Vt " + detail::shape_str(s), vt, {a});
  }
  // Non-square: the thin factors are unique up to sign, the extra columns
  // of the full factor only up to a rotation, so check sign-free functions
  // of the thin part and the complement's projector.
  // (The first k columns are picked by a 0/1 mask rather than a slice.)
  auto factor = [](const array& a, bool left) {
    auto f = linalg::svd(a);
    return left ? f[0] : transpose(f[2]);
  };
  auto first_cols = [](const array& x, int k, bool keep) {
    int n = x.shape(-1);
    auto idx = arange(0, n, 1);
    auto m = astype(keep ? less(idx, array(k)) : greater_equal(idx, array(k)),
                    float64);
    return multiply(x, m);
  };
  auto thin = [&](bool left) {
    return one([=](auto& a) {
      int k = std::min(a.shape(-2), a.shape(-1));
      auto x = first_cols(factor(a, left), k, true);
      return multiply(x, x);
    });
  };
  auto projector = [&](bool left) {
    return one([=](auto& a) {
      int k = std::min(a.shape(-2), a.shape(-1));
      auto x = factor(a, left);
      return matmul(first_cols(x, k, false), transpose(x));
    });
  };
  auto tall = rnd({4, 2}), wide = rnd({2, 4});
  EXPECT_TRUE(check_vjp(thin(true), {tall}));
  EXPECT_TRUE(check_vjp(thin(false), {tall}));
  EXPECT_TRUE(check_vjp(thin(true), {wide}));
  EXPECT_TRUE(check_vjp(thin(false), {wide}));
  EXPECT_TRUE(check_vjp(projector(true), {tall}));
  EXPECT_TRUE(check_vjp(projector(false), {wide}));
  // jvp and vjp agree on the full factors, complement included
  EXPECT_TRUE(check_jvp(u, {tall}));
  EXPECT_TRUE(check_jvp(vt, {wide}));
  EXPECT_TRUE(check_jvp(u, {wide}));
  EXPECT_TRUE(check_jvp(vt, {tall}));
  // reconstruction U S V^T = A has gradient exactly the cotangent
  auto rec = one([](auto& a) {
    auto f = linalg::svd(a);
    return matmul(multiply(f[0], expand_dims(f[1], -2)), f[2]);
  });
  check_transforms("svd reconstruction", rec, {rnd({3, 3})});
}

TEST(GradSVD, RepeatedSingularValuesLimit) {
  // Documented limit: with repeated singular values the singular vectors'
  // derivative is undefined (non-finite), while S's stays exact.
  auto a = eye(3, 3, 0, float64);
  auto gs =
      grad([](const array& x) { return sum(linalg::svd(x, false)[0]); })(a);
  EXPECT_TRUE(all_close(to_doubles(gs), to_doubles(a), 1e-12, 1e-12));
  auto gu = grad([](const array& x) { return sum(linalg::svd(x)[0]); })(a);
  bool finite = true;
  for (double v : to_doubles(gu)) finite = finite && std::isfinite(v);
  EXPECT_FALSE(finite);
}

} // namespace
} // namespace kiln::test
