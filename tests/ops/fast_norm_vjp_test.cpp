// The norms' fused backwards (LayerNormVjp, RMSNormVjp) on the CPU: the
// gradients of x, weight and bias against float64 loops and against the
// fallback graph's gradient, for each float dtype, layout of x, parameter
// combination and row length (1, not a multiple of a vector width, past a
// warp's reach).
#include <cmath>

#include "kiln/primitives/fast.h"
#include "kiln/transforms/autograd.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

struct NormGrads {
  std::vector<double> dx, dw, db;
};

// dx, dweight and dbias of sum(g * norm(x)) in float64, for x of row length
// n and weight w (all ones when absent).
NormGrads norm_vjp_ref(const std::vector<double>& x,
                       const std::vector<double>& w,
                       const std::vector<double>& g, int n, double eps,
                       bool rms) {
  NormGrads out{std::vector<double>(x.size()), std::vector<double>(n, 0.0),
                std::vector<double>(n, 0.0)};
  for (size_t r = 0; r * n < x.size(); ++r) {
    const double* xr = &x[r * n];
    const double* gr = &g[r * n];
    double mean = 0, var = 0;
    if (!rms) {
      for (int j = 0; j < n; ++j) mean += xr[j];
      mean /= n;
    }
    for (int j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1 / std::sqrt(var / n + eps);
    double mean_gw = 0, mean_gw_xhat = 0;
    for (int j = 0; j < n; ++j) {
      double xhat = (xr[j] - mean) * rstd;
      mean_gw += gr[j] * w[j] / n;
      mean_gw_xhat += gr[j] * w[j] * xhat / n;
      out.dw[j] += gr[j] * xhat;
      out.db[j] += gr[j];
    }
    if (rms) mean_gw = 0;
    for (int j = 0; j < n; ++j) {
      double xhat = (xr[j] - mean) * rstd;
      out.dx[r * n + j] =
          rstd * (gr[j] * w[j] - mean_gw - xhat * mean_gw_xhat);
    }
  }
  return out;
}

// x of shape (rows, n) in several layouts: row-major, transposed, a strided
// slice and a broadcast row (values differ between them).
std::vector<std::pair<std::string, array>> x_layouts(int rows, int n,
                                                     Dtype dt) {
  auto a = random_array({rows, n}, dt, -3, 3);
  auto twice = random_array({rows, 2 * n}, dt, -3, 3);
  return {
      {"contiguous", a},
      {"transposed", as_transposed(random_array({rows, n}, dt, -3, 3))},
      {"sliced", slice(twice, Shape{0, 1}, Shape{rows, 2 * n}, Shape{1, 2})},
      {"broadcast", broadcast_to(random_array({1, n}, dt, -3, 3), {rows, n})},
  };
}

struct NormCase {
  std::string name;
  bool rms, weight, bias;
};

const std::vector<NormCase>& norm_cases() {
  static const std::vector<NormCase> cases = {
      {"layer_norm", false, true, true},
      {"layer_norm weight only", false, true, false},
      {"layer_norm bias only", false, false, true},
      {"layer_norm plain", false, false, false},
      {"rms_norm", true, true, false},
      {"rms_norm plain", true, false, false},
  };
  return cases;
}

// The case's norm of in = (x[, weight][, bias]) with eps 1e-5.
array apply_norm(const NormCase& c, const std::vector<array>& in) {
  std::optional<array> w, b;
  size_t k = 1;
  if (c.weight) w = in[k++];
  if (c.bias) b = in[k++];
  return c.rms ? fast::rms_norm(in[0], w, 1e-5f)
               : fast::layer_norm(in[0], w, b, 1e-5f);
}

// The same function through the norm's fallback graph.
array apply_fallback(const NormCase& c, const std::vector<array>& in) {
  auto y = apply_norm(c, in);
  auto& p = dynamic_cast<fast::Custom&>(y.primitive());
  return p.fallback()(y.inputs())[0];
}

TEST(NormVjp, MatchesFloat64AndTheFallbackGraph) {
  for (Dtype dt : float_dtypes()) {
    // The fused backward rounds each gradient once; the graph's gradient
    // rounds its intermediates (and sums dweight in dt).
    double tol = tolerance(dt) * 2, graph_tol = tolerance(dt) * 8;
    for (int n : {1, 6, 37, 1100}) {
      for (auto& [layout, x] : x_layouts(5, n, dt)) {
        auto w = random_array({n}, dt, 0.5, 2);
        auto b = random_array({n}, dt, -1, 1);
        auto g = random_array({5, n}, dt, -2, 2);
        for (auto& c : norm_cases()) {
          std::vector<array> in = {x};
          if (c.weight) in.push_back(w);
          if (c.bias) in.push_back(b);
          std::vector<int> argnums;
          for (size_t i = 0; i < in.size(); ++i) argnums.push_back(i);
          auto fused = vjp(
              [&](const std::vector<array>& a) {
                return std::vector<array>{apply_norm(c, a)};
              },
              in, {g});
          auto graph = vjp(
              [&](const std::vector<array>& a) {
                return std::vector<array>{apply_fallback(c, a)};
              },
              in, {g});
          std::string what = c.name + " " + layout + " " + dtype_name(dt) +
                             " n=" + std::to_string(n);
          // The fused backward computes x's gradient on both devices.
          EXPECT_EQ(std::string(fused.second[0].primitive().name()),
                    c.rms ? "RMSNormVjp" : "LayerNormVjp")
              << what;
          std::vector<double> ws = c.weight ? to_doubles(w)
                                            : std::vector<double>(n, 1.0);
          auto want = norm_vjp_ref(to_doubles(x), ws, to_doubles(g), n, 1e-5f,
                                   c.rms);
          EXPECT_TRUE(
              all_close(to_doubles(fused.second[0]), want.dx, tol, tol))
              << what << " dx";
          EXPECT_TRUE(all_close(to_doubles(fused.second[0]),
                                to_doubles(graph.second[0]), graph_tol,
                                graph_tol))
              << what << " dx vs graph";
          size_t k = 1;
          for (auto* ref : {c.weight ? &want.dw : nullptr,
                            c.bias ? &want.db : nullptr}) {
            if (!ref) continue;
            auto& got = fused.second[k];
            EXPECT_EQ(got.shape(), (Shape{n})) << what;
            EXPECT_EQ(got.dtype(), dt) << what;
            EXPECT_TRUE(all_close(to_doubles(got), *ref, tol, tol))
                << what << " param " << k;
            EXPECT_TRUE(all_close(to_doubles(got), to_doubles(graph.second[k]),
                                  graph_tol, graph_tol))
                << what << " param " << k << " vs graph";
            ++k;
          }
        }
      }
    }
  }
}

TEST(NormVjp, OutputsAreRowMajorAndKeepX) {
  auto x = as_transposed(random_array({7, 33}, float32, -2, 2));
  auto w = random_array({33}, float32, 0.5, 2);
  auto g = random_array({7, 33}, float32, -2, 2);
  auto grads = vjp(
      [&](const std::vector<array>& a) {
        return std::vector<array>{fast::rms_norm(a[0], a[1], 1e-5f)};
      },
      {x, w}, {g});
  eval(grads.second);
  EXPECT_EQ(grads.second[0].shape(), x.shape());
  EXPECT_TRUE(grads.second[0].flags().row_contiguous);
  EXPECT_EQ(grads.second[1].shape(), (Shape{33}));
}

TEST(NormVjp, WeightGradientOfAScalarWeightSumsAllElements) {
  // The 0-d stand-in of an absent weight: dweight sums g * xhat over all
  // elements (the primitive is only made so through the vjp's inputs).
  auto x = random_array({4, 9}, float64, -2, 2);
  auto g = random_array({4, 9}, float64, -2, 2);
  auto w = array(1.5, float64);
  // The graph the vjp would give it: the vjp of layer_norm's graph times
  // the weight.
  auto fallback = [](std::vector<array> in) {
    auto f = [](const std::vector<array>& a) {
      auto xc = subtract(a[0], mean(a[0], -1, true));
      auto var = mean(square(xc), -1, true);
      auto y = multiply(xc, rsqrt(add(var, array(1e-5, float64))));
      return std::vector<array>{multiply(y, a[1])};
    };
    return kiln::vjp(f, {in[0], in[1]}, {in[2]}).second;
  };
  auto grads = array::make_arrays(
      {x.shape(), w.shape()}, {float64, float64},
      std::make_shared<fast::LayerNormVjp>(default_stream(Device::cpu),
                                           fallback, 1e-5f),
      {x, w, g});
  auto want = norm_vjp_ref(to_doubles(x), std::vector<double>(9, 1.5),
                           to_doubles(g), 9, 1e-5f, false);
  double total = 0;
  for (double v : want.dw) total += v;
  EXPECT_EQ(grads[1].shape(), Shape{});
  EXPECT_NEAR(grads[1].item<double>(), total, 1e-9 * (1 + std::abs(total)));
  EXPECT_TRUE(all_close(to_doubles(grads[0]), want.dx, 1e-9, 1e-9));
}

TEST(NormVjp, EmptyRowsUseTheGraph) {
  auto x = zeros({0, 5}, float32);
  auto w = random_array({5}, float32, 0.5, 2);
  auto grads = vjp(
      [&](const std::vector<array>& a) {
        return std::vector<array>{fast::layer_norm(a[0], a[1], a[1], 1e-5f)};
      },
      {x, w}, {zeros({0, 5}, float32)});
  EXPECT_EQ(grads.second[0].shape(), (Shape{0, 5}));
  EXPECT_TRUE(all_close(to_doubles(grads.second[1]),
                        std::vector<double>(5, 0.0), 0, 0));
}

} // namespace
} // namespace kiln::test
