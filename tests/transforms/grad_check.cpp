#include "transforms/grad_check.h"

#include <cmath>

#include "kiln/ops/utils.h"

namespace kiln::test {

namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

bool skipped(const std::vector<int>& skip, int i) {
  return std::find(skip.begin(), skip.end(), i) != skip.end();
}

array with_values(const array& like, const std::vector<double>& v) {
  return array(v.begin(), like.shape(), like.dtype());
}

} // namespace

::testing::AssertionResult check_vjp(const ArrayFn& fun,
                                     const std::vector<array>& inputs,
                                     double rtol,
                                     const std::vector<int>& skip) {
  auto out = fun(inputs);
  auto cot = random_array(out.shape(), float64, -1, 1);
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& x) { return std::vector<array>{fun(x)}; },
      inputs, {astype(cot, out.dtype())});
  auto cs = to_doubles(cot);
  const double h = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (skipped(skip, static_cast<int>(i))) continue;
    if (!is_floating_point(inputs[i].dtype())) continue;
    auto g = to_doubles(grads[i]);
    auto x = to_doubles(inputs[i]);
    std::vector<double> fd(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      auto args = inputs;
      auto xp = x, xm = x;
      xp[k] += h;
      xm[k] -= h;
      args[i] = with_values(inputs[i], xp);
      double fp = dot(to_doubles(fun(args)), cs);
      args[i] = with_values(inputs[i], xm);
      double fm = dot(to_doubles(fun(args)), cs);
      fd[k] = (fp - fm) / (2 * h);
    }
    double scale = 1e-3;
    for (double v : fd) scale = std::max(scale, std::abs(v));
    for (size_t k = 0; k < x.size(); ++k) {
      if (!(std::abs(g[k] - fd[k]) <= rtol * scale)) {
        return ::testing::AssertionFailure()
               << "input " << i << " element " << k << ": vjp " << g[k]
               << ", finite difference " << fd[k];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_jvp(const ArrayFn& fun,
                                     const std::vector<array>& inputs,
                                     double rtol,
                                     const std::vector<int>& skip) {
  std::vector<array> tangents;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool active = !skipped(skip, static_cast<int>(i)) &&
                  is_floating_point(inputs[i].dtype());
    tangents.push_back(active ? random_array(inputs[i].shape(), inputs[i].dtype(), -1, 1)
                              : zeros_like(inputs[i]));
  }
  auto wrapped = [&](const std::vector<array>& x) {
    return std::vector<array>{fun(x)};
  };
  auto [outs, jvps] = jvp(wrapped, inputs, tangents);
  auto cot = random_array(outs[0].shape(), outs[0].dtype(), -1, 1);
  auto [outs2, vjps] = vjp(wrapped, inputs, {cot});
  double lhs = dot(to_doubles(jvps[0]), to_doubles(cot));
  double rhs = 0, scale = std::abs(lhs) + 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (skipped(skip, static_cast<int>(i)) || !is_floating_point(inputs[i].dtype())) {
      continue;
    }
    double term = dot(to_doubles(tangents[i]), to_doubles(vjps[i]));
    rhs += term;
    scale = std::max(scale, std::abs(term));
  }
  if (std::abs(lhs - rhs) <= rtol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "<jvp(t), c> = " << lhs << " but <t, vjp(c)> = " << rhs;
}

::testing::AssertionResult check_vmap(const ArrayFn& fun,
                                      const std::vector<array>& inputs,
                                      const std::vector<int>& in_axes,
                                      double rtol) {
  auto vf = vmap([&](const std::vector<array>& x) {
    return std::vector<array>{fun(x)};
  }, in_axes);
  auto got = vf(inputs)[0];
  int batch = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] >= 0) batch = inputs[i].shape(in_axes[i]);
  }
  std::vector<array> rows;
  for (int b = 0; b < batch; ++b) {
    std::vector<array> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      args.push_back(in_axes[i] >= 0 ? take(inputs[i], b, in_axes[i]) : inputs[i]);
    }
    rows.push_back(fun(args));
  }
  auto want = stack(rows, 0);
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "vmap shape " << detail::shape_str(got.shape()) << " vs loop "
           << detail::shape_str(want.shape());
  }
  return all_close(to_doubles(got), to_doubles(want), rtol, rtol);
}

void check_transforms(const std::string& name, const ArrayFn& fun,
                      const std::vector<array>& inputs,
                      const std::vector<int>& skip, double rtol) {
  std::vector<array> f64;
  for (auto& x : inputs) {
    f64.push_back(is_floating_point(x.dtype()) ? astype(x, float64) : x);
  }
  EXPECT_TRUE(check_vjp(fun, f64, rtol, skip)) << name << " vjp";
  EXPECT_TRUE(check_jvp(fun, f64, 1e-8, skip)) << name << " jvp";
  // vmap: every input mapped along a new leading axis of size 3, and once
  // with only the first input mapped (at its last axis).
  std::vector<array> batched;
  std::vector<int> axes;
  for (auto& x : f64) {
    std::vector<array> variants = {x};
    for (int k = 0; k < 2; ++k) {
      variants.push_back(is_floating_point(x.dtype())
                             ? add(x, random_array(x.shape(), float64, -0.1, 0.1))
                             : x);
    }
    batched.push_back(stack(variants, 0));
    axes.push_back(0);
  }
  EXPECT_TRUE(check_vmap(fun, batched, axes)) << name << " vmap (all mapped)";
  auto first = f64;
  first[0] = moveaxis(batched[0], 0, -1);
  std::vector<int> one(f64.size(), -1);
  one[0] = static_cast<int>(f64[0].ndim());
  EXPECT_TRUE(check_vmap(fun, first, one)) << name << " vmap (first mapped, last axis)";
}

} // namespace kiln::test
