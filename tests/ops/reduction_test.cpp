// Reductions, arg-reductions and scans against float64 loops.
#include <cmath>
#include <complex>
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

TEST(Reduction, Complex64TruthMeanAndVariance) {
  // As NumPy and MLX: a complex value is true when either part is nonzero;
  // the mean is complex, the variance the real mean of |x - mean|^2.
  std::vector<complex64_t> v = {{0, 1}, {2, 0}, {0, 0}, {3, 1}, {0, -2}, {0, 0}};
  array z(v, {2, 3}, complex64);
  EXPECT_TRUE(all_close(to_doubles(astype(z, bool_)), {1, 1, 0, 1, 1, 0}, 0, 0));
  EXPECT_TRUE(all_close(to_doubles(all(z, 0)), {1, 1, 0}, 0, 0));
  EXPECT_TRUE(all_close(to_doubles(any(z, 1)), {1, 1}, 0, 0));
  EXPECT_TRUE(all_close(to_doubles(astype(z, int32)), {0, 2, 0, 3, 0, 0}, 0, 0));
  for (auto& in : {z, as_transposed(z)}) {
    array m = mean(in, 1);
    ASSERT_EQ(m.dtype(), complex64);
    EXPECT_TRUE(all_close(to_doubles(real(m)), {2.0 / 3, 1}, 1e-6, 1e-6));
    EXPECT_TRUE(all_close(to_doubles(imag(m)), {1.0 / 3, -1.0 / 3}, 1e-6, 1e-6));
    // Row 0: mean (2 + i) / 3; |x - mean|^2 summed = 2 (ddof 0: / 3).
    array var0 = var(in, 1);
    ASSERT_EQ(var0.dtype(), float32);
    std::vector<double> want(2, 0.0);
    for (int r = 0; r < 2; ++r) {
      std::complex<double> mu = 0;
      for (int c = 0; c < 3; ++c) mu += std::complex<double>(v[r * 3 + c]);
      mu /= 3.0;
      for (int c = 0; c < 3; ++c) {
        want[r] += std::norm(std::complex<double>(v[r * 3 + c]) - mu);
      }
    }
    EXPECT_TRUE(all_close(to_doubles(var0),
                          {want[0] / 3, want[1] / 3}, 1e-6, 1e-6));
    EXPECT_TRUE(all_close(to_doubles(var(in, 1, false, 1)),
                          {want[0] / 2, want[1] / 2}, 1e-6, 1e-6));
  }
}

TEST(Reduction, Complex64RunningExtremes) {
  // cummax/cummin order by real part, then imaginary part (as MLX), both
  // directions, inclusive and exclusive (starting from -inf-infj or
  // inf+infj), along both axes of a row-major and a transposed array.
  std::uniform_int_distribution<int> few(-2, 2);
  std::vector<complex64_t> v;
  for (int i = 0; i < 5 * 7; ++i) {
    v.emplace_back(static_cast<float>(few(rng())),
                   static_cast<float>(few(rng())) / 2);
  }
  array z(v, {5, 7}, complex64);
  const float inf = INFINITY;
  for (const array& in : {z, as_transposed(z)}) {
    for (int axis : {0, 1}) {
      for (bool is_max : {true, false}) {
        for (bool reverse : {false, true}) {
          for (bool inclusive : {true, false}) {
            array got = contiguous(is_max ? cummax(in, axis, reverse, inclusive)
                                          : cummin(in, axis, reverse, inclusive));
            got.eval();
            int n = in.shape(axis), lines = in.shape(1 - axis);
            for (int l = 0; l < lines; ++l) {
              complex64_t acc = is_max ? complex64_t(-inf, -inf)
                                       : complex64_t(inf, inf);
              for (int k = 0; k < n; ++k) {
                int i = reverse ? n - 1 - k : k;
                int o = axis == 0 ? i * 7 + l : l * 7 + i;
                complex64_t x = v[o];
                complex64_t before_x = acc;
                if (is_max ? complex_before(acc, x) : complex_before(x, acc)) acc = x;
                ASSERT_EQ(got.data<complex64_t>()[o], inclusive ? acc : before_x)
                    << axis << is_max << reverse << inclusive << " " << l << " "
                    << i;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Reduction, Complex64Logcumsumexp) {
  // Running logaddexp as MLX's (the larger value by real part, then
  // imaginary part, plus log1p(exp(smaller - larger))), from -inf + 0i,
  // against a complex128 loop; both directions, inclusive and exclusive.
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<complex64_t> v;
  for (int i = 0; i < 4 * 6; ++i) v.emplace_back(u(rng()), u(rng()));
  array z(v, {4, 6}, complex64);
  using cd = std::complex<double>;
  for (bool reverse : {false, true}) {
    for (bool inclusive : {true, false}) {
      array got = contiguous(logcumsumexp(as_transposed(z), 1, reverse,
                                          inclusive));
      got.eval();
      for (int r = 0; r < 4; ++r) {
        cd acc(-INFINITY, 0);
        for (int k = 0; k < 6; ++k) {
          int c = reverse ? 5 - k : k;
          cd x(v[r * 6 + c]), before_x = acc;
          if (std::isinf(acc.real())) {
            acc = x;
          } else {
            cd hi = complex_before(acc, x) ? x : acc;
            cd lo = complex_before(acc, x) ? acc : x;
            acc = hi + std::log(1.0 + std::exp(lo - hi));
          }
          cd want = inclusive ? acc : before_x;
          cd g(got.data<complex64_t>()[r * 6 + c]);
          if (std::isinf(want.real())) {
            EXPECT_TRUE(std::isinf(g.real()) && g.real() < 0) << r << " " << c;
          } else {
            EXPECT_LT(std::abs(g - want), 1e-5 * (1 + std::abs(want)))
                << reverse << inclusive << " " << r << " " << c;
          }
        }
      }
    }
  }
}

// logsumexp over one axis runs as one LogSumExp pass per row: every float
// dtype (integers become float32), every layout, each axis, keepdims,
// against float64 loops; several axes (all of them too) compose.
TEST(Reduction, LogSumExpEveryDtypeLayoutAndAxis) {
  auto reference = [](const array& x, int axis) {
    auto xs = to_doubles(x);
    int rows = x.shape(0), cols = x.shape(1);
    int outer = axis == 0 ? cols : rows, n = axis == 0 ? rows : cols;
    std::vector<double> out(outer);
    for (int o = 0; o < outer; ++o) {
      double m = -INFINITY, s = 0;
      for (int k = 0; k < n; ++k) {
        m = std::max(m, axis == 0 ? xs[k * cols + o] : xs[o * cols + k]);
      }
      for (int k = 0; k < n; ++k) {
        s += std::exp((axis == 0 ? xs[k * cols + o] : xs[o * cols + k]) - m);
      }
      out[o] = m + std::log(s);
    }
    return out;
  };
  for (Dtype dt : {float32, float16, bfloat16, float64, int32}) {
    auto x = random_array({9, 13}, dt, -4, 4);
    double tol = dt == int32 ? 1e-5 : 2 * tolerance(dt);
    std::vector<std::pair<std::string, array>> inputs = {
        {"contiguous", x},
        {"transposed", as_transposed(x)},
        {"sliced", slice(random_array({11, 15}, dt, -4, 4), {1, 2}, {10, 15})},
        {"broadcast", broadcast_to(random_array({13}, dt, -4, 4), {9, 13})}};
    for (auto& [layout, in] : inputs) {
      for (int axis : {0, 1, -1}) {
        auto got = logsumexp(in, axis);
        EXPECT_EQ(got.dtype(), dt == int32 ? float32 : dt);
        EXPECT_TRUE(got.has_primitive());
        EXPECT_TRUE(all_close(to_doubles(got),
                              reference(in, axis < 0 ? axis + 2 : axis), tol,
                              tol))
            << dtype_name(dt) << " " << layout << " axis " << axis;
        EXPECT_EQ(logsumexp(in, axis, true).shape(),
                  axis == 0 ? Shape({1, 13}) : Shape({9, 1}));
      }
    }
  }
  // All axes.
  auto cube = random_array({3, 4, 5}, float32, -3, 3);
  auto flat = reference(reshape(cube, {1, 60}), 1);
  EXPECT_NEAR(logsumexp(cube).item<float>(), flat[0], 1e-5);
  EXPECT_EQ(logsumexp(cube, true).shape(), Shape({1, 1, 1}));
  EXPECT_NEAR(logsumexp(as_transposed(cube)).item<float>(), flat[0], 1e-5);
  // Two of three axes: composed from reductions, same answer.
  auto two = logsumexp(cube, {0, 2});
  auto moved = reshape(transpose(cube, {1, 0, 2}), {4, 15});
  EXPECT_TRUE(all_close(to_doubles(two), reference(moved, 1), 1e-5, 1e-5));
}

// Huge rows stay finite; a row holding +inf gives +inf, an all -inf row
// -inf, a NaN anywhere NaN; long rows (past one warp's reach) too.
TEST(Reduction, LogSumExpInfinitiesNaNAndLongRows) {
  double inf = INFINITY, nan = NAN;
  auto x = array({3e4, 3e4 - 1, -inf, 1.0, inf, -2.0, -inf, -inf, -inf, 0.5,
                  nan, 2.0},
                 {4, 3});
  for (Dtype dt : {float32, float16, float64}) {
    auto got = to_doubles(logsumexp(astype(x, dt), 1));
    // float16 holds 3e4 - 1 as 3e4 (its values are 16 apart there).
    double spacing = dt == float16 ? 16 : 1e-2;
    EXPECT_NEAR(got[0], 3e4 + std::log(1 + std::exp(-1.0)), spacing)
        << dtype_name(dt);
    EXPECT_EQ(got[1], inf) << dtype_name(dt);
    EXPECT_EQ(got[2], -inf) << dtype_name(dt);
    EXPECT_TRUE(std::isnan(got[3])) << dtype_name(dt);
  }
  for (int n : {511, 513, 5000}) {
    auto row = random_array({3, n}, float32, -5, 5);
    auto xs = to_doubles(row);
    for (int r = 0; r < 3; ++r) {
      double m = -INFINITY, s = 0;
      for (int j = 0; j < n; ++j) m = std::max(m, xs[r * n + j]);
      for (int j = 0; j < n; ++j) s += std::exp(xs[r * n + j] - m);
      EXPECT_NEAR(to_doubles(logsumexp(row, 1))[r], m + std::log(s), 1e-4)
          << n;
    }
  }
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

// Long lines (the vectorized searches of contiguous float32 lines, in
// lanes): many ties (the first extreme wins), NaNs anywhere (the first NaN
// wins; max and min give NaN), every line length around the lane count,
// contiguous and strided, every family; argmax/argmin, max/min per line and
// over everything.
TEST(Reduction, ExtremesOfLongLinesTiesAndNaN) {
  auto first_extreme = [](const std::vector<double>& v, int64_t begin,
                          int64_t n, int64_t step, bool is_max) {
    int64_t best = 0;
    for (int64_t k = 0; k < n; ++k) {
      double x = v[begin + k * step];
      if (std::isnan(x)) return k;
      double b = v[begin + best * step];
      if (is_max ? x > b : x < b) best = k;
    }
    return best;
  };
  for (Dtype dt : {float32, float64, bfloat16, int32, uint8, int64}) {
    for (int n : {31, 32, 33, 47, 48, 63, 64, 65, 79, 80, 100, 127, 128, 129,
                  1000, 4099}) {
      // Values in [0, 6): ties everywhere.
      auto x = random_array({3, n}, dt, 0, 6);
      if (is_inexact(dt)) x = floor(x);
      std::vector<array> inputs = {x};
      if (is_inexact(dt)) {
        auto v = to_doubles(x);
        v[n + n / 2] = NAN;       // row 1: one NaN mid-line
        v[2 * n + n - 1] = NAN;   // row 2: NaNs at the end and earlier
        v[2 * n + n / 3] = NAN;
        inputs.push_back(astype(array(v.begin(), {3, n}, float64), dt));
      }
      for (auto& in : inputs) {
        auto xs = to_doubles(in);
        for (bool is_max : {true, false}) {
          auto got = to_doubles(is_max ? argmax(in, 1) : argmin(in, 1));
          // The lines down the columns of a row-major copy: strided.
          auto cols = contiguous(transpose(in));
          auto got_t = to_doubles(is_max ? argmax(cols, 0) : argmin(cols, 0));
          auto value = to_doubles(is_max ? max(in, 1) : min(in, 1));
          auto whole = (is_max ? max(in) : min(in)).item<double>();
          bool any_nan = false;
          double want_whole = is_max ? -INFINITY : INFINITY;
          for (int r = 0; r < 3; ++r) {
            double want = first_extreme(xs, r * n, n, 1, is_max);
            EXPECT_EQ(got[r], want) << dt << " n " << n << " row " << r
                                    << (is_max ? " argmax" : " argmin");
            EXPECT_EQ(got_t[r], want) << dt << " n " << n << " strided";
            double v = xs[r * n + static_cast<int64_t>(want)];
            if (std::isnan(v)) {
              EXPECT_TRUE(std::isnan(value[r])) << dt << " n " << n;
              any_nan = true;
            } else {
              EXPECT_EQ(value[r], v) << dt << " n " << n << " row " << r;
              want_whole = is_max ? std::max(want_whole, v)
                                  : std::min(want_whole, v);
            }
          }
          if (any_nan) {
            EXPECT_TRUE(std::isnan(whole)) << dt << " n " << n;
          } else {
            EXPECT_EQ(whole, want_whole) << dt << " n " << n;
          }
        }
      }
    }
  }
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
  // Narrow integers accumulate in 32 bits, as sum and prod do: no wrap.
  EXPECT_EQ(cumsum(array({100, 100}, int8)).dtype(), int32);
  EXPECT_EQ(to_doubles(cumsum(array({100, 100}, int8))),
            (std::vector<double>{100, 200}));
  EXPECT_EQ(cumprod(array({200, 100}, uint8)).dtype(), uint32);
  EXPECT_EQ(to_doubles(cumprod(array({200, 100}, uint8))),
            (std::vector<double>{200, 20000}));
  EXPECT_EQ(cumprod(array({true, false}, bool_)).dtype(), int32);
  EXPECT_THROW(cumsum(x, 2), std::invalid_argument);
}

// Scans along outer axes step blocks of lines together (a row at a time):
// the middle and first axes of 3-d arrays wider than a block of 512 lines,
// contiguous, transposed (whose axes may not collapse: the line-by-line
// path) and sliced, every direction and mode, widening integer sums,
// 16-bit floats, and a NaN that cummax and logcumsumexp carry down.
TEST(Reduction, ScansAlongOuterAxes) {
  // The reference: each line of `in` (row-major doubles, shape sh) along
  // axis scanned with op from init.
  auto reference = [](const std::vector<double>& xs, const Shape& sh, int axis,
                      bool reverse, bool inclusive, double init,
                      double (*op)(double, double)) {
    int64_t n = sh[axis], inner = 1, outer = 1;
    for (size_t d = axis + 1; d < sh.size(); ++d) inner *= sh[d];
    for (int d = 0; d < axis; ++d) outer *= sh[d];
    std::vector<double> out(xs.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t w = 0; w < inner; ++w) {
        double acc = init;
        for (int64_t k = 0; k < n; ++k) {
          int64_t i = reverse ? n - 1 - k : k;
          int64_t at = (o * n + i) * inner + w;
          if (!inclusive) out[at] = acc;
          acc = op(acc, xs[at]);
          if (inclusive) out[at] = acc;
        }
      }
    }
    return out;
  };
  auto add = [](double a, double b) { return a + b; };
  auto max_nan = [](double a, double b) {
    return std::isnan(a) || a > b ? a : b;
  };
  auto lae = [](double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
    double m = std::max(a, b);
    return std::isinf(m) ? m : m + std::log1p(std::exp(-std::abs(a - b)));
  };
  auto base = random_array({3, 5, 700}, float32, 0.5, 1.5);
  std::vector<array> inputs = {
      base, transpose(random_array({700, 5, 3}, float32, 0.5, 1.5)),
      slice(random_array({3, 9, 1400}, float32, 0.5, 1.5), Shape{0, 1, 0},
            Shape{3, 6, 1400}, Shape{1, 1, 2})};
  auto with_nan_values = to_doubles(base);
  with_nan_values[1 * 700 + 3] = NAN; // [0, 1, 3]
  inputs.push_back(array(with_nan_values.begin(), {3, 5, 700}, float32));
  for (auto& in : inputs) {
    auto xs = to_doubles(in);
    for (int axis : {0, 1}) {
      for (bool reverse : {false, true}) {
        for (bool inclusive : {true, false}) {
          std::string what = "axis " + std::to_string(axis) + " reverse " +
                             std::to_string(reverse) + " inclusive " +
                             std::to_string(inclusive);
          EXPECT_TRUE(all_close(to_doubles(cumsum(in, axis, reverse, inclusive)),
                                reference(xs, in.shape(), axis, reverse,
                                          inclusive, 0.0, add),
                                1e-5, 1e-5))
              << "cumsum " << what;
          if (inclusive) {
            EXPECT_TRUE(all_close(to_doubles(cummax(in, axis, reverse)),
                                  reference(xs, in.shape(), axis, reverse, true,
                                            -INFINITY, max_nan),
                                  0, 0))
                << "cummax " << what;
          }
          EXPECT_TRUE(all_close(
              to_doubles(logcumsumexp(in, axis, reverse, inclusive)),
              reference(xs, in.shape(), axis, reverse, inclusive, -INFINITY,
                        lae),
              1e-5, 1e-5))
              << "logcumsumexp " << what;
        }
      }
    }
  }
  // Integer sums widen (int8 into int32), exactly; 16-bit floats keep their
  // dtype, within a rounding per step of the float64 sum.
  auto ints = random_array({4, 600}, int8, -100, 100);
  auto isum = cumsum(ints, 0);
  EXPECT_EQ(isum.dtype(), int32);
  EXPECT_EQ(to_doubles(isum),
            reference(to_doubles(ints), ints.shape(), 0, false, true, 0.0, add));
  auto halves = random_array({6, 530}, float16, 0.5, 1.5);
  auto hsum = cumsum(halves, 0);
  EXPECT_EQ(hsum.dtype(), float16);
  EXPECT_TRUE(all_close(to_doubles(hsum),
                        reference(to_doubles(halves), halves.shape(), 0, false,
                                  true, 0.0, add),
                        6 * tolerance(float16), 0));
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
