// Reductions, arg-reductions and scans against float64 loops.
#include <cmath>
#include <numeric>

#include "test_utils.h"

namespace kiln::test {
namespace {

// Reference reduction of a row-major double vector over axes.
std::vector<double> ref_reduce(const std::vector<double>& x, const Shape& shape,
                               const std::vector<int>& axes, double init,
                               const std::function<double(double, double)>& f) {
  Shape out_shape = shape;
  for (int ax : axes) out_shape[ax] = 1;
  size_t n_out = 1;
  for (auto d : out_shape) n_out *= d;
  std::vector<double> out(n_out, init);
  std::vector<int> idx(shape.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    size_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      o = o * out_shape[d] + (out_shape[d] == 1 ? 0 : idx[d]);
    }
    out[o] = f(out[o], x[i]);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<std::vector<int>> axis_sets() {
  return {{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
}

TEST(Reduction, SumProdMaxMinAllAxesLayoutsDtypes) {
  Shape shape = {4, 5, 6};
  for (Dtype dt : {float32, float64, float16, bfloat16, int32, int8, uint8,
                   int64, bool_}) {
    auto base = random_array(shape, dt, dt == uint8 ? 0 : -3, 3);
    std::vector<array> inputs = {base, as_transposed(base),
                                 broadcast_to(random_array({1, 5, 1}, dt, -3, 3), shape)};
    for (auto& x : inputs) {
      auto xs = to_doubles(x);
      for (auto& axes : axis_sets()) {
        auto check = [&](const array& got, double init,
                         std::function<double(double, double)> f, Dtype odt) {
          auto want = quantize(ref_reduce(xs, shape, axes, init, f), odt);
          double tol = is_inexact(odt) ? tolerance(odt) * 50 : 0;
          EXPECT_TRUE(all_close(to_doubles(got), want, tol, tol))
              << dt << " axes " << axes.size() << " " << axes[0];
          EXPECT_EQ(got.dtype(), odt);
        };
        auto sum_dt = sum(x, axes).dtype();
        check(sum(x, axes, true), 0, std::plus<double>(), sum_dt);
        check(max(x, axes, true), -INFINITY,
              [](double a, double b) { return std::max(a, b); }, dt);
        check(min(x, axes, true), INFINITY,
              [](double a, double b) { return std::min(a, b); }, dt);
        check(all(x, axes, true), 1, [](double a, double b) { return double(a && b); }, bool_);
        check(any(x, axes, true), 0, [](double a, double b) { return double(a || b); }, bool_);
        if (is_inexact(dt)) {
          auto small = multiply(x, array(0.5f, dt));
          auto ss = to_doubles(small);
          auto want = quantize(ref_reduce(ss, shape, axes, 1, std::multiplies<double>()), dt);
          EXPECT_TRUE(all_close(to_doubles(prod(small, axes, true)), want,
                                tolerance(dt) * 50, 1e-6));
        }
      }
    }
  }
}

TEST(Reduction, KeepdimsAndShapes) {
  auto x = random_array({2, 3, 4}, float32);
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(sum(x, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(sum(x, 1).shape(), (Shape{2, 4}));
  EXPECT_EQ(sum(x, -1, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(sum(x, std::vector<int>{}).shape(), x.shape());
  EXPECT_EQ(sum(array({true, true, false})).item<int>(), 2);
  EXPECT_EQ(sum(array({true})).dtype(), int32);
  EXPECT_EQ(sum(array({1}, uint8)).dtype(), uint32);
  EXPECT_EQ(sum(array({1}, int64)).dtype(), int64);
}

TEST(Reduction, ZeroSizeAndScalar) {
  auto e = zeros({0, 3});
  EXPECT_EQ(to_doubles(sum(e, 0)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(to_doubles(prod(e, 0)), (std::vector<double>{1, 1, 1}));
  EXPECT_TRUE(all(e).item<bool>());
  EXPECT_FALSE(any(e).item<bool>());
  EXPECT_EQ(sum(e, 1).shape(), (Shape{0}));
  EXPECT_THROW(max(e, 0), std::invalid_argument);
  EXPECT_EQ(sum(array(3.0f)).item<float>(), 3.0f);
}

TEST(Reduction, LargeSumIsAccurate) {
  // 2^22 values: the blocked float accumulation stays near float64.
  auto x = random_array({1 << 22}, float32, 0, 1);
  double want = 0;
  for (double v : to_doubles(x)) want += v;
  EXPECT_NEAR(sum(x).item<float>(), want, 1e-6 * want);
  auto t = random_array({1024, 1024}, float32, 0, 1);
  auto col = to_doubles(sum(transpose(t), 1));
  auto rows = to_doubles(sum(t, 0));
  EXPECT_TRUE(all_close(col, rows, 1e-6, 1e-6));
}

TEST(Reduction, MeanVarStdLogsumexp) {
  auto x = random_array({6, 7}, float32);
  auto xs = to_doubles(x);
  for (int axis : {0, 1}) {
    auto s = ref_reduce(xs, {6, 7}, {axis}, 0, std::plus<double>());
    double n = axis == 0 ? 6 : 7;
    auto m = map1(s, [&](double v) { return v / n; });
    EXPECT_TRUE(all_close(to_doubles(mean(x, axis)), m, 1e-5, 1e-6));
    // variance via a second pass
    std::vector<double> v(m.size(), 0), lse(m.size(), 0), mx(m.size(), -INFINITY);
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 7; ++j) {
        int o = axis == 0 ? j : i;
        double d = xs[i * 7 + j] - m[o];
        v[o] += d * d;
        mx[o] = std::max(mx[o], xs[i * 7 + j]);
      }
    }
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 7; ++j) {
        int o = axis == 0 ? j : i;
        lse[o] += std::exp(xs[i * 7 + j] - mx[o]);
      }
    }
    auto var0 = map1(v, [&](double a) { return a / n; });
    auto var1 = map1(v, [&](double a) { return a / (n - 1); });
    EXPECT_TRUE(all_close(to_doubles(var(x, axis)), var0, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(to_doubles(var(x, axis, false, 1)), var1, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(to_doubles(std(x, axis)),
                          map1(var0, [](double a) { return std::sqrt(a); }), 1e-5, 1e-6));
    std::vector<double> want_lse(m.size());
    for (size_t o = 0; o < m.size(); ++o) want_lse[o] = mx[o] + std::log(lse[o]);
    EXPECT_TRUE(all_close(to_doubles(logsumexp(x, axis)), want_lse, 1e-5, 1e-6));
  }
  EXPECT_EQ(mean(array({1, 2})).dtype(), float32);
  // logsumexp stays finite for huge inputs and handles -inf rows.
  auto big = array({1000.0f, 1000.0f});
  EXPECT_NEAR(logsumexp(big).item<float>(), 1000.0f + std::log(2.0f), 1e-3);
  auto ninf = array({-INFINITY, -INFINITY});
  EXPECT_EQ(logsumexp(ninf).item<float>(), -INFINITY);
}

TEST(Reduction, ArgMaxArgMin) {
  for (Dtype dt : {float32, float16, int32, uint8}) {
    auto x = random_array({5, 9}, dt, 0, 50);
    for (auto& in : {x, as_transposed(x)}) {
      auto xs = to_doubles(in);
      for (int axis : {0, 1}) {
        auto am = to_doubles(argmax(in, axis));
        auto an = to_doubles(argmin(in, axis));
        int n_out = axis == 0 ? 9 : 5, n = axis == 0 ? 5 : 9;
        for (int o = 0; o < n_out; ++o) {
          int best = 0, worst = 0;
          auto at = [&](int k) { return axis == 0 ? xs[k * 9 + o] : xs[o * 9 + k]; };
          for (int k = 1; k < n; ++k) {
            if (at(k) > at(best)) best = k;
            if (at(k) < at(worst)) worst = k;
          }
          EXPECT_EQ(am[o], best);
          EXPECT_EQ(an[o], worst);
        }
      }
    }
  }
  auto x = array({1.0f, 5.0f, 5.0f, NAN, 2.0f});
  EXPECT_EQ(argmax(x).item<uint32_t>(), 3u); // NaN wins, like NumPy
  EXPECT_EQ(argmax(array({1.0f, 5.0f, 5.0f})).item<uint32_t>(), 1u);
  EXPECT_EQ(argmax(x).dtype(), uint32);
  EXPECT_EQ(argmax(random_array({2, 3}, float32), true).shape(), (Shape{1, 1}));
  EXPECT_THROW(argmax(zeros({0})), std::invalid_argument);
  EXPECT_THROW(argmax(x, 1), std::invalid_argument);
}

TEST(Reduction, Scans) {
  auto x = random_array({4, 6}, float32, 0.5, 1.5);
  for (auto& in : {x, as_transposed(x)}) {
    auto xs = to_doubles(in);
    for (int axis : {0, 1}) {
      for (bool reverse : {false, true}) {
        for (bool inclusive : {true, false}) {
          std::vector<double> ws(24), wp(24), wmax(24), wmin(24);
          int n = axis == 0 ? 4 : 6, lines = 24 / n;
          for (int l = 0; l < lines; ++l) {
            double s = 0, p = 1, mx = -INFINITY, mn = INFINITY;
            for (int k = 0; k < n; ++k) {
              int kk = reverse ? n - 1 - k : k;
              int idx = axis == 0 ? kk * 6 + l : l * 6 + kk;
              if (!inclusive) {
                ws[idx] = s; wp[idx] = p; wmax[idx] = mx; wmin[idx] = mn;
              }
              s += xs[idx]; p *= xs[idx];
              mx = std::max(mx, xs[idx]); mn = std::min(mn, xs[idx]);
              if (inclusive) {
                ws[idx] = s; wp[idx] = p; wmax[idx] = mx; wmin[idx] = mn;
              }
            }
          }
          EXPECT_TRUE(all_close(to_doubles(cumsum(in, axis, reverse, inclusive)), ws, 1e-5, 1e-6));
          EXPECT_TRUE(all_close(to_doubles(cumprod(in, axis, reverse, inclusive)), wp, 1e-5, 1e-6));
          if (inclusive) {
            EXPECT_TRUE(all_close(to_doubles(cummax(in, axis, reverse)), wmax, 0, 0));
            EXPECT_TRUE(all_close(to_doubles(cummin(in, axis, reverse)), wmin, 0, 0));
          }
        }
      }
    }
  }
  EXPECT_EQ(cumsum(array({true, true})).dtype(), int32);
  EXPECT_EQ(to_doubles(cumsum(array({1, 2, 3}, int8))), (std::vector<double>{1, 3, 6}));
  EXPECT_THROW(cumsum(x, 2), std::invalid_argument);
}

TEST(Reduction, BadAxes) {
  auto x = random_array({2, 3}, float32);
  EXPECT_THROW(sum(x, 2), std::invalid_argument);
  EXPECT_THROW(sum(x, std::vector<int>{0, 0}), std::invalid_argument);
  try {
    max(x, -3);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[max]"), std::string::npos);
  }
}

} // namespace
} // namespace kiln::test
