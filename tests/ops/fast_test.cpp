// softmax, layer_norm and rms_norm against float64 loops, on contiguous,
// transposed and broadcast inputs, for each float dtype; the fast ops'
// fallback graphs must agree with their kernels.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/primitives/fast.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

template <typename F>
void expect_invalid(F&& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << "no exception for " << op;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[" + op + "]"), std::string::npos)
        << e.what();
  }
}

// Row-major multi-index helpers for the references.
std::vector<int> unravel(size_t i, const Shape& shape) {
  std::vector<int> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = static_cast<int>(i % shape[d]);
    i /= shape[d];
  }
  return idx;
}

// Softmax over `axes` in float64: elements sharing the other indices form
// one group.
std::vector<double> softmax_ref(const std::vector<double>& x,
                                const Shape& shape, std::vector<int> axes) {
  auto group = [&](size_t i) {
    auto idx = unravel(i, shape);
    for (int ax : axes) idx[ax] = 0;
    size_t g = 0;
    for (size_t d = 0; d < shape.size(); ++d) g = g * shape[d] + idx[d];
    return g;
  };
  std::vector<double> mx(x.size(), -INFINITY), sum(x.size(), 0), out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    mx[group(i)] = std::max(mx[group(i)], x[i]);
  }
  for (size_t i = 0; i < x.size(); ++i)
    sum[group(i)] += std::exp(x[i] - mx[group(i)]);
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = std::exp(x[i] - mx[group(i)]) / sum[group(i)];
  }
  return out;
}

std::vector<array> layouts(const Shape& shape, Dtype dt, double lo, double hi) {
  auto row = random_array({1, shape.back()}, dt, lo, hi);
  Shape rows = {shape[0] * shape[1], shape.back()};
  return {
      random_array(shape, dt, lo, hi),
      as_transposed(random_array(shape, dt, lo, hi)),
      transpose(random_array({shape.back(), shape[1], shape[0]}, dt, lo, hi)),
      reshape(broadcast_to(row, rows), shape)};
}

TEST(Softmax, MatchesFloat64OverAnyAxes) {
  std::vector<std::vector<int>> axes_cases = {
      {-1}, {0}, {1}, {0, 2}, {0, 1, 2}};
  for (Dtype dt : float_dtypes()) {
    for (auto& x : layouts({3, 4, 5}, dt, -4, 4)) {
      for (auto& axes : axes_cases) {
        for (bool precise : {false, true}) {
          auto y = softmax(x, axes, precise);
          EXPECT_EQ(y.dtype(), dt);
          EXPECT_EQ(y.shape(), x.shape());
          std::vector<int> norm;
          for (int a : axes) norm.push_back(a < 0 ? a + 3 : a);
          auto want = softmax_ref(to_doubles(x), x.shape(), norm);
          double tol = tolerance(dt) * 4;
          EXPECT_TRUE(all_close(to_doubles(y), want, tol, tol))
              << dt << " axes " << axes.size() << " precise " << precise;
        }
      }
    }
  }
}

TEST(Softmax, LargeValuesStayFinite) {
  auto x = random_array({4, 64}, float32, 900, 1100);
  auto want = softmax_ref(to_doubles(x), x.shape(), {1});
  EXPECT_TRUE(all_close(to_doubles(softmax(x, -1)), want, 1e-5, 1e-7));
  auto neg = random_array({4, 64}, float32, -1100, -900);
  auto want_neg = softmax_ref(to_doubles(neg), neg.shape(), {1});
  EXPECT_TRUE(all_close(to_doubles(softmax(neg, -1)), want_neg, 1e-5, 1e-7));
  // Several axes go through the composed path.
  auto all = softmax(x);
  EXPECT_TRUE(all_close(to_doubles(all),
                        softmax_ref(to_doubles(x), x.shape(), {0, 1}), 1e-5,
                        1e-9));
}

TEST(Softmax, PreciseAccumulatesHalfInFloat32) {
  // A long row: float16 sums lose digits that float32 keeps. (mlx 0.32.4
  // shows the same: an 11% worst error without precise on such rows.)
  auto x = random_array({2, 4096}, float16, -1, 1);
  auto want = softmax_ref(to_doubles(x), x.shape(), {1});
  auto precise = to_doubles(softmax(x, -1, true));
  auto plain = to_doubles(softmax(x, -1, false));
  EXPECT_TRUE(all_close(precise, want, 2e-3, 1e-7));
  EXPECT_TRUE(all_close(plain, want, 0.15, 1e-6));
  double err_precise = 0, err_plain = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err_precise += std::abs(precise[i] - want[i]);
    err_plain += std::abs(plain[i] - want[i]);
  }
  EXPECT_LT(err_precise, err_plain);
}

TEST(Softmax, IntegersScalarsAndEmpty) {
  auto y = softmax(array({1, 2, 3}));
  EXPECT_EQ(y.dtype(), float32);
  EXPECT_TRUE(
      all_close(to_doubles(y), softmax_ref({1, 2, 3}, {3}, {0}), 1e-6, 1e-7));
  auto s = softmax(array(2.0f));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item<float>(), 1.0f);
  auto e = softmax(zeros({0, 3}), -1);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_TRUE(to_doubles(e).empty());
  // NaN in a row poisons that row only, as exp/sum would.
  auto n = to_doubles(
      softmax(array({1.0f, NAN, 0.0f, 1.0f, 2.0f, 3.0f}, {2, 3}), -1));
  EXPECT_TRUE(std::isnan(n[0]) && std::isnan(n[2]));
  EXPECT_FALSE(std::isnan(n[3]));
}

// Long rows go through the 16-lane max and libmvec's exp: rows of 1000
// and of 37 elements (a vector tail) in every float dtype, with a row
// holding a NaN, one holding +inf and one of -inf only (NaN throughout,
// as exp and the sum give), against float64; logsumexp of the same rows.
TEST(Softmax, LongRowsWithSpecialValues) {
  for (int n : {1000, 37}) {
    for (Dtype dt : float_dtypes()) {
      auto vals = to_doubles(random_array({5, n}, dt, -8, 8));
      vals[n + 3] = NAN;
      vals[2 * n + 5] = INFINITY;
      for (int j = 0; j < n; ++j) vals[3 * n + j] = -INFINITY;
      vals[4 * n + 1] = 60; // dominates its row
      auto x = array(vals.begin(), {5, n}, dt);
      auto xs = to_doubles(x);
      for (bool precise : {false, true}) {
        auto got = to_doubles(softmax(x, -1, precise));
        for (int r = 0; r < 5; ++r) {
          std::vector<double> row(xs.begin() + r * n, xs.begin() + (r + 1) * n);
          bool nan_row = r == 1 || r == 2 || r == 3;
          auto want = nan_row ? std::vector<double>(n, NAN)
                              : softmax_ref(row, {n}, {0});
          for (int j = 0; j < n; ++j) {
            double g = got[r * n + j], w = want[j];
            if (nan_row) {
              ASSERT_TRUE(std::isnan(g)) << dt << " row " << r << " at " << j;
            } else {
              // Without precise, 16-bit rows sum in their own dtype, as
              // MLX's do: a few percent off over long rows.
              bool half_sum = !precise && (dt == float16 || dt == bfloat16);
              double rel = half_sum ? 0.15 : 4 * tolerance(dt);
              ASSERT_NEAR(g, w, rel * std::max(w, 1e-3))
                  << dt << " n " << n << " precise " << precise;
            }
          }
        }
      }
      auto lse = to_doubles(logsumexp(x, std::vector<int>{1}));
      for (int r = 0; r < 5; ++r) {
        if (r == 1) {
          EXPECT_TRUE(std::isnan(lse[r])) << dt;
          continue;
        }
        if (r == 2 || r == 3) {
          EXPECT_EQ(lse[r], r == 2 ? INFINITY : -INFINITY) << dt;
          continue;
        }
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < n; ++j) m = std::max(m, xs[r * n + j]);
        for (int j = 0; j < n; ++j) sum += std::exp(xs[r * n + j] - m);
        EXPECT_NEAR(lse[r], m + std::log(sum),
                    4 * tolerance(dt) * std::abs(m + std::log(sum)) + 1e-6)
            << dt << " n " << n;
      }
    }
  }
}

TEST(Softmax, BadArguments) {
  auto x = zeros({2, 3});
  expect_invalid([&] { softmax(x, 2); }, "softmax");
  expect_invalid([&] { softmax(x, std::vector<int>{0, -2}); }, "softmax");
  // complex64 is no bad argument (as MLX): equal values share equally.
  auto sc = softmax(zeros({2}, complex64));
  EXPECT_EQ(sc.dtype(), complex64);
  EXPECT_TRUE(all_close(to_doubles(real(sc)), {0.5, 0.5}, 1e-7, 0));
  EXPECT_TRUE(all_close(to_doubles(imag(sc)), {0.0, 0.0}, 0, 0));
}

// ---- layer_norm and rms_norm ------------------------------------------------

std::vector<double> norm_ref(const std::vector<double>& x, int n,
                             const std::vector<double>* w,
                             const std::vector<double>* b, double eps,
                             bool rms) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r * n < x.size(); ++r) {
    double mean = 0, var = 0;
    if (!rms) {
      for (int j = 0; j < n; ++j) mean += x[r * n + j];
      mean /= n;
    }
    for (int j = 0; j < n; ++j) var += std::pow(x[r * n + j] - mean, 2);
    double inv = 1 / std::sqrt(var / n + eps);
    for (int j = 0; j < n; ++j) {
      double y = (x[r * n + j] - mean) * inv;
      if (w) y *= (*w)[j];
      if (b) y += (*b)[j];
      out[r * n + j] = y;
    }
  }
  return out;
}

array fallback_of(const array& y) {
  auto& p = dynamic_cast<fast::Custom&>(y.primitive());
  return p.fallback()(y.inputs())[0];
}

TEST(Norms, MatchFloat64AndTheirFallbacks) {
  for (Dtype dt : float_dtypes()) {
    double tol = tolerance(dt) * 8;
    for (auto& x : layouts({3, 4, 6}, dt, -3, 3)) {
      auto w = random_array({6}, dt, 0.5, 2);
      auto b = random_array({6}, dt, -1, 1);
      auto xs = to_doubles(x), ws = to_doubles(w), bs = to_doubles(b);
      struct Case {
        array y;
        std::vector<double> want;
      };
      std::vector<Case> cases = {
          {fast::layer_norm(x, w, b, 1e-5f),
           norm_ref(xs, 6, &ws, &bs, 1e-5f, false)},
          {fast::layer_norm(x, std::nullopt, std::nullopt, 1e-3f),
           norm_ref(xs, 6, nullptr, nullptr, 1e-3f, false)},
          {fast::layer_norm(x, w, std::nullopt, 1e-5f),
           norm_ref(xs, 6, &ws, nullptr, 1e-5f, false)},
          {fast::rms_norm(x, w, 1e-5f),
           norm_ref(xs, 6, &ws, nullptr, 1e-5f, true)},
          {fast::rms_norm(x, std::nullopt, 1e-2f),
           norm_ref(xs, 6, nullptr, nullptr, 1e-2f, true)},
      };
      for (auto& c : cases) {
        EXPECT_EQ(c.y.dtype(), dt);
        std::string name = c.y.primitive().name();
        auto fb = fallback_of(c.y);
        EXPECT_TRUE(all_close(to_doubles(c.y), c.want, tol, tol))
            << name << " " << dt;
        EXPECT_TRUE(all_close(to_doubles(fb), c.want, tol, tol))
            << "fallback of " << name << " " << dt;
      }
    }
  }
}

TEST(Norms, PromoteBroadcastParamsAndEdgeShapes) {
  auto x = random_array({5, 8}, float16, -2, 2);
  auto w = broadcast_to(array({1.5f}), {8}); // stride 0
  auto y = fast::rms_norm(x, w, 1e-5f);
  EXPECT_EQ(y.dtype(), float32);
  auto xs = to_doubles(x), ws = to_doubles(w);
  EXPECT_TRUE(all_close(
      to_doubles(y), norm_ref(xs, 8, &ws, nullptr, 1e-5f, true), 1e-5, 1e-6));
  auto v = random_array({300}, float32, -1, 1); // one long 1-d row
  auto vs = to_doubles(v);
  EXPECT_TRUE(all_close(to_doubles(fast::layer_norm(v, {}, {}, 1e-5f)),
                        norm_ref(vs, 300, nullptr, nullptr, 1e-5f, false), 1e-5,
                        1e-5));
  auto e = fast::layer_norm(zeros({0, 4}), {}, {}, 1e-5f);
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  EXPECT_TRUE(to_doubles(e).empty());
}

TEST(Norms, BadArguments) {
  auto x = zeros({2, 3});
  expect_invalid([&] { fast::rms_norm(array(1.0f), {}, 1e-5f); }, "rms_norm");
  expect_invalid([&] { fast::rms_norm(x, zeros({4}), 1e-5f); }, "rms_norm");
  expect_invalid([&] { fast::rms_norm(x, zeros({1, 3}), 1e-5f); }, "rms_norm");
  expect_invalid(
      [&] {
        fast::rms_norm(zeros({2, 3}, int32), {}, 1e-5f);
      },
      "rms_norm");
  expect_invalid([&] { fast::layer_norm(array(1.0f), {}, {}, 1e-5f); },
                 "layer_norm");
  expect_invalid([&] { fast::layer_norm(x, zeros({2}), {}, 1e-5f); },
                 "layer_norm");
  expect_invalid(
      [&] {
        fast::layer_norm(x, {}, zeros({3, 1}), 1e-5f);
      },
      "layer_norm");
  expect_invalid(
      [&] {
        fast::layer_norm(zeros({2, 3}, int8), zeros({3}, int8), {}, 1e-5f);
      },
      "layer_norm");
}

} // namespace
} // namespace kiln::test
