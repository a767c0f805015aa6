// Transformation rules of Softmax and LogSumExp: finite differences, the jvp/vjp identity
// and vmap on every layout, low-precision dtypes against a float64
// reference, and second-order compositions.
#include <cmath>

#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

using Fun = std::function<array(const std::vector<array>&)>;

// The gradient of sum(w * f(x)) with respect to x, as a function of x.
Fun grad_of(const Fun& f, const array& w) {
  return [f, w](const std::vector<array>& in) {
    return grad([&](const std::vector<array>& x) {
      return sum(multiply(f(x), w));
    })(in)[0];
  };
}

// check_transforms of f on a (3, 5) float64 input in each layout.
void check_layouts(const std::string& name, const Fun& f) {
  check_transforms(name, f, {random_array({3, 5}, float64, -3, 3)});
  check_transforms(name + " transposed", f,
                   {as_transposed(random_array({3, 5}, float64, -3, 3))});
  check_transforms(name + " broadcast", f,
                   {broadcast_to(random_array({5}, float64), {3, 5})});
  check_transforms(name + " sliced", f,
                   {slice(random_array({5, 7}, float64), {1, 1}, {4, 6})});
}

TEST(GradSoftmax, AllLayoutsAndAxes) {
  for (int axis : {-1, 0}) {
    for (bool precise : {false, true}) {
      check_layouts("softmax axis " + std::to_string(axis),
                    [=](const std::vector<array>& in) {
                      return softmax(in[0], axis, precise);
                    });
    }
  }
  check_transforms(
      "softmax 3-d middle axis",
      [](const std::vector<array>& in) { return softmax(in[0], 1); },
      {random_array({2, 4, 3}, float64)});
}

// The LogSumExp primitive (one axis) and the composed form (all axes):
// finite differences,
// the jvp/vjp identity and vmap, on every layout and over each axis.
TEST(GradLogSumExp, AllLayoutsAndAxes) {
  for (int axis : {-1, 0}) {
    for (bool keepdims : {false, true}) {
      check_layouts("logsumexp axis " + std::to_string(axis),
                    [=](const std::vector<array>& in) {
                      return logsumexp(in[0], axis, keepdims);
                    });
    }
  }
  check_transforms(
      "logsumexp over all axes",
      [](const std::vector<array>& in) { return logsumexp(in[0]); },
      {random_array({2, 4, 3}, float64)});
  check_transforms(
      "logsumexp 3-d middle axis",
      [](const std::vector<array>& in) { return logsumexp(in[0], 1); },
      {random_array({2, 4, 3}, float64)});
}

// d/dx sum(w * logsumexp(x)) = w * softmax(x) on each row, in each float
// dtype against float64.
TEST(GradLogSumExp, MatchesReferenceInEachDtype) {
  for (Dtype dt : float_dtypes()) {
    auto x = random_array({4, 6}, dt, -2, 2);
    auto w = random_array({4}, dt, -1, 1);
    auto g = grad(
        [&](const array& v) { return sum(multiply(logsumexp(v, -1), w)); })(x);
    EXPECT_EQ(g.dtype(), dt);
    auto xs = to_doubles(x), ws = to_doubles(w);
    std::vector<double> want(xs.size());
    for (int r = 0; r < 4; ++r) {
      double m = -INFINITY, den = 0;
      for (int j = 0; j < 6; ++j) m = std::max(m, xs[r * 6 + j]);
      for (int j = 0; j < 6; ++j) den += std::exp(xs[r * 6 + j] - m);
      for (int j = 0; j < 6; ++j) {
        want[r * 6 + j] = ws[r] * std::exp(xs[r * 6 + j] - m) / den;
      }
    }
    EXPECT_TRUE(all_close(to_doubles(g), want, 4 * tolerance(dt),
                          4 * tolerance(dt)))
        << dtype_name(dt);
  }
}

TEST(GradSoftmax, MatchesReferenceInEachDtype) {
  // d/dx sum(w * softmax(x)) = y * (w - sum(w * y)) on each row.
  for (Dtype dt : float_dtypes()) {
    auto x = random_array({4, 6}, dt, -2, 2);
    auto w = random_array({4, 6}, dt, -1, 1);
    auto g = grad(
        [&](const array& v) { return sum(multiply(softmax(v, -1), w)); })(x);
    EXPECT_EQ(g.dtype(), dt);
    auto xs = to_doubles(x), ws = to_doubles(w);
    std::vector<double> want(xs.size());
    for (int r = 0; r < 4; ++r) {
      double m = -INFINITY, den = 0, dot = 0;
      for (int j = 0; j < 6; ++j) m = std::max(m, xs[r * 6 + j]);
      for (int j = 0; j < 6; ++j) den += std::exp(xs[r * 6 + j] - m);
      for (int j = 0; j < 6; ++j) {
        dot += ws[r * 6 + j] * std::exp(xs[r * 6 + j] - m) / den;
      }
      for (int j = 0; j < 6; ++j) {
        double y = std::exp(xs[r * 6 + j] - m) / den;
        want[r * 6 + j] = y * (ws[r * 6 + j] - dot);
      }
    }
    double tol = 4 * tolerance(dt) + 1e-12;
    EXPECT_TRUE(all_close(to_doubles(g), want, tol, tol)) << dtype_name(dt);
  }
}

TEST(GradSoftmax, EmptyAndSecondOrder) {
  auto g = grad([](const array& v) { return sum(softmax(v, -1)); })(
      zeros({0, 4}, float32));
  EXPECT_EQ(g.shape(), (Shape{0, 4}));
  // grad of grad and vmap of grad
  auto w = random_array({3, 5}, float64);
  check_transforms("softmax grad",
                   grad_of([](auto& in) { return softmax(in[0], -1); }, w),
                   {random_array({3, 5}, float64)});
  // Hessian-vector product by jvp of grad
  auto x = random_array({5}, float64);
  auto t = random_array({5}, float64);
  auto gw = random_array({5}, float64);
  auto hv = jvp(
                [&](const array& v) {
                  return grad([&](const array& u) {
                    return sum(multiply(softmax(u, 0), gw));
                  })(v);
                },
                x, t)
                .second;
  // finite difference of the gradient along t
  auto gfun = [&](const array& v) {
    return to_doubles(grad(
        [&](const array& u) { return sum(multiply(softmax(u, 0), gw)); })(v));
  };
  double h = 1e-6;
  auto gp = gfun(add(x, multiply(t, array(h, float64))));
  auto gm = gfun(subtract(x, multiply(t, array(h, float64))));
  std::vector<double> fd(5);
  for (int i = 0; i < 5; ++i) fd[i] = (gp[i] - gm[i]) / (2 * h);
  EXPECT_TRUE(all_close(to_doubles(hv), fd, 1e-6, 1e-8));
}

} // namespace
} // namespace kiln::test
