// Elementwise ops against float64 references, on contiguous, transposed and
// broadcast inputs, for each dtype family.
#include <cmath>
#include <functional>

#include "test_utils.h"

namespace kiln::test {
namespace {

struct UnaryCase {
  const char* name;
  std::function<array(const array&)> op;
  std::function<double(double)> ref;
  double lo, hi;
};

const std::vector<UnaryCase>& unary_cases() {
  static std::vector<UnaryCase> cases = {
      {"exp", [](auto& a) { return exp(a); }, [](double x) { return std::exp(x); }, -3, 3},
      {"expm1", [](auto& a) { return expm1(a); }, [](double x) { return std::expm1(x); }, -1, 1},
      {"log", [](auto& a) { return log(a); }, [](double x) { return std::log(x); }, 0.1, 5},
      {"log1p", [](auto& a) { return log1p(a); }, [](double x) { return std::log1p(x); }, -0.5, 3},
      {"log2", [](auto& a) { return log2(a); }, [](double x) { return std::log2(x); }, 0.1, 5},
      {"log10", [](auto& a) { return log10(a); }, [](double x) { return std::log10(x); }, 0.1, 5},
      {"sin", [](auto& a) { return sin(a); }, [](double x) { return std::sin(x); }, -3, 3},
      {"cos", [](auto& a) { return cos(a); }, [](double x) { return std::cos(x); }, -3, 3},
      {"tan", [](auto& a) { return tan(a); }, [](double x) { return std::tan(x); }, -1, 1},
      {"arcsin", [](auto& a) { return arcsin(a); }, [](double x) { return std::asin(x); }, -0.9, 0.9},
      {"arccos", [](auto& a) { return arccos(a); }, [](double x) { return std::acos(x); }, -0.9, 0.9},
      {"arctan", [](auto& a) { return arctan(a); }, [](double x) { return std::atan(x); }, -3, 3},
      {"sinh", [](auto& a) { return sinh(a); }, [](double x) { return std::sinh(x); }, -2, 2},
      {"cosh", [](auto& a) { return cosh(a); }, [](double x) { return std::cosh(x); }, -2, 2},
      {"tanh", [](auto& a) { return tanh(a); }, [](double x) { return std::tanh(x); }, -2, 2},
      {"arcsinh", [](auto& a) { return arcsinh(a); }, [](double x) { return std::asinh(x); }, -2, 2},
      {"arccosh", [](auto& a) { return arccosh(a); }, [](double x) { return std::acosh(x); }, 1.1, 4},
      {"arctanh", [](auto& a) { return arctanh(a); }, [](double x) { return std::atanh(x); }, -0.9, 0.9},
      {"sqrt", [](auto& a) { return sqrt(a); }, [](double x) { return std::sqrt(x); }, 0.1, 5},
      {"rsqrt", [](auto& a) { return rsqrt(a); }, [](double x) { return 1 / std::sqrt(x); }, 0.1, 5},
      {"reciprocal", [](auto& a) { return reciprocal(a); }, [](double x) { return 1 / x; }, 0.5, 5},
      {"sigmoid", [](auto& a) { return sigmoid(a); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -5, 5},
      {"erf", [](auto& a) { return erf(a); }, [](double x) { return std::erf(x); }, -2, 2},
      {"square", [](auto& a) { return square(a); }, [](double x) { return x * x; }, -3, 3},
      {"abs", [](auto& a) { return abs(a); }, [](double x) { return std::abs(x); }, -3, 3},
      {"negative", [](auto& a) { return negative(a); }, [](double x) { return -x; }, -3, 3},
      {"sign", [](auto& a) { return sign(a); }, [](double x) { return (x > 0) - (x < 0); }, -3, 3},
      {"floor", [](auto& a) { return floor(a); }, [](double x) { return std::floor(x); }, -3, 3},
      {"ceil", [](auto& a) { return ceil(a); }, [](double x) { return std::ceil(x); }, -3, 3},
      {"round", [](auto& a) { return round(a); }, [](double x) { return std::nearbyint(x); }, -3, 3},
  };
  return cases;
}

// A 0-d, an empty, a contiguous, a transposed and a broadcast input.
std::vector<array> layouts(Dtype dt, double lo, double hi) {
  auto base = random_array({5, 7}, dt, lo, hi);
  auto row = random_array({1, 7}, dt, lo, hi);
  return {random_array({}, dt, lo, hi), random_array({0, 3}, dt, lo, hi),
          base, as_transposed(random_array({6, 4, 3}, dt, lo, hi)),
          broadcast_to(row, {5, 7}), transpose(base)};
}

TEST(Elementwise, UnaryFloatOpsMatchFloat64) {
  for (auto& c : unary_cases()) {
    for (Dtype dt : float_dtypes()) {
      for (auto& x : layouts(dt, c.lo, c.hi)) {
        auto y = c.op(x);
        EXPECT_EQ(y.dtype(), dt) << c.name;
        EXPECT_EQ(y.shape(), x.shape()) << c.name;
        auto want = quantize(map1(to_doubles(x), c.ref), dt);
        double tol = tolerance(dt) * 4;
        EXPECT_TRUE(all_close(to_doubles(y), want, tol, tol))
            << c.name << " " << dt << " shape " << x.ndim();
      }
    }
  }
}

// sigmoid is 1 / (1 + exp(-x)) throughout (libmvec's exp on contiguous
// float runs): where exp(-x) overflows the result is 0, not NaN; +-0 give
// 0.5; NaN stays NaN; contiguous and transposed inputs, every float dtype.
TEST(Elementwise, SigmoidAtTheEnds) {
  std::vector<double> xs = {-INFINITY, -1000, -100, -88.5, -20, -1, -0.0,
                            0.0,       1e-30, 0.75, 20,    100, 1000,
                            INFINITY,  NAN,   -3.5};
  for (Dtype dt : float_dtypes()) {
    auto q = quantize(xs, dt);
    auto x = array(q.begin(), {4, 4}, dt);
    for (auto& in : {x, as_transposed(transpose(x))}) {
      auto got = to_doubles(sigmoid(in));
      auto vals = to_doubles(in);
      for (size_t i = 0; i < got.size(); ++i) {
        double v = vals[i];
        double want = quantize({1 / (1 + std::exp(-v))}, dt)[0];
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(got[i])) << dt;
        } else {
          EXPECT_NEAR(got[i], want, 4 * tolerance(dt) * want + 1e-300)
              << "sigmoid(" << v << ") " << dt;
        }
      }
    }
  }
}

// An element's result does not depend on the length of the array it sits
// in: the vector body, the remainder and a scalar tail would call
// different exp/log/pow implementations (libmvec's and libm's, 1 ulp
// apart), and fast-math would divide by a reciprocal estimate in some of
// them. Lengths 1 to 160 cover every remainder of every vector width.
TEST(Elementwise, AnElementIgnoresTheArrayLength) {
  auto xs = random_array({160}, float32, 0.1, 3.0);
  auto ys = random_array({160}, float32, -2.0, 2.0);
  using Fn = std::function<array(const array&, const array&)>;
  std::vector<std::pair<const char*, Fn>> ops = {
      {"sigmoid", [](auto& x, auto&) { return sigmoid(x); }},
      {"exp", [](auto& x, auto&) { return exp(x); }},
      {"log", [](auto& x, auto&) { return log(x); }},
      {"sin", [](auto& x, auto&) { return sin(x); }},
      {"power", [](auto& x, auto& y) { return power(x, y); }},
      {"power by a scalar", [](auto& x, auto&) {
         return power(x, array(0.7f, x.dtype()));
       }},
      {"power of a scalar", [](auto&, auto& y) {
         return power(array(1.3f, y.dtype()), y);
       }},
  };
  for (Dtype dt : {float32, float64}) {
    auto x = astype(xs, dt), y = astype(ys, dt);
    for (auto& [name, f] : ops) {
      auto full = f(x, y);
      full.eval();
      for (int n = 1; n < 160; ++n) {
        auto part = f(slice(x, {0}, {n}), slice(y, {0}, {n}));
        part.eval();
        for (int i = 0; i < n; ++i) {
          double a = dt == float32 ? part.data<float>()[i] : part.data<double>()[i];
          double b = dt == float32 ? full.data<float>()[i] : full.data<double>()[i];
          ASSERT_EQ(a, b) << name << ": element " << i << " of " << n << " " << dt;
        }
      }
    }
  }
}

// round takes halves to even (one instruction on AVX2 and AVX-512 for
// contiguous float runs): halves, signed zeros, infinities, NaN and values
// past 2^23, contiguous and transposed, every float dtype.
TEST(Elementwise, RoundHalvesToEvenKeepingSigns) {
  std::vector<double> xs = {0.5,  1.5,      2.5,       -0.5, -1.5,    -2.5,
                            -0.4, -0.0,     0.0,       3.7,  -3.7,    8388609,
                            1e10, INFINITY, -INFINITY, NAN};
  for (Dtype dt : float_dtypes()) {
    auto q = quantize(xs, dt);
    auto x = array(q.begin(), {4, 4}, dt);
    for (auto& in : {x, as_transposed(transpose(x))}) {
      auto got = to_doubles(round(in)), vals = to_doubles(in);
      for (size_t i = 0; i < got.size(); ++i) {
        double want = std::nearbyint(vals[i]);
        EXPECT_TRUE((std::isnan(want) && std::isnan(got[i])) ||
                    (got[i] == want &&
                     std::signbit(got[i]) == std::signbit(want)))
            << "round(" << vals[i] << ") = " << got[i] << " " << dt;
      }
    }
  }
}

TEST(Elementwise, AbsClearsTheSignOfZero) {
  // abs(-0.0) is +0.0 (IEEE fabs, as NumPy and MLX), in every float dtype,
  // contiguous and strided; negative values and infinities flip, NaN stays.
  std::vector<double> xs = {-0.0, 0.0, -1.5, 2.25, -INFINITY, NAN};
  for (Dtype dt : float_dtypes()) {
    auto q = quantize(xs, dt);
    auto x = array(q.begin(), {2, 3}, dt);
    for (auto& in : {x, as_transposed(transpose(x))}) {
      auto got = to_doubles(abs(in)), vals = to_doubles(in);
      for (size_t i = 0; i < got.size(); ++i) {
        double want = std::fabs(vals[i]);
        EXPECT_TRUE((std::isnan(want) && std::isnan(got[i])) ||
                    (got[i] == want && !std::signbit(got[i])))
            << "abs(" << vals[i] << ") = " << got[i] << " " << dt;
      }
    }
  }
}

TEST(Elementwise, ErfInvInvertsErf) {
  auto x = random_array({100}, float64, -0.99, 0.99);
  auto want = to_doubles(x);
  auto got = to_doubles(erf(erfinv(x)));
  EXPECT_TRUE(all_close(got, want, 1e-13, 1e-13));
  auto f = random_array({100}, float32, -0.99, 0.99);
  EXPECT_TRUE(all_close(to_doubles(erf(erfinv(f))), to_doubles(f), 1e-5, 1e-5));
  auto edge = to_doubles(erfinv(array({-1.0f, 1.0f, 2.0f})));
  EXPECT_EQ(edge[0], -INFINITY);
  EXPECT_EQ(edge[1], INFINITY);
  EXPECT_TRUE(std::isnan(edge[2]));
}

TEST(Elementwise, IntegerInputsPromoteToFloat) {
  auto x = random_array({4, 3}, int32, 1, 9);
  auto y = exp(x);
  EXPECT_EQ(y.dtype(), float32);
  auto want = map1(to_doubles(x), [](double v) { return std::exp(v); });
  EXPECT_TRUE(all_close(to_doubles(y), want, 1e-6, 0));
  // Rounding an integer is the identity, and keeps the dtype.
  EXPECT_EQ(floor(x).dtype(), int32);
  EXPECT_EQ(to_doubles(floor(x)), to_doubles(x));
}

TEST(Elementwise, IntegerUnary) {
  for (Dtype dt : int_dtypes()) {
    auto x = random_array({6, 5}, dt, is_unsigned(dt) ? 0 : -50, 50);
    auto xs = to_doubles(x);
    EXPECT_EQ(to_doubles(abs(x)),
              quantize(map1(xs, [](double v) { return std::abs(v); }), dt));
    EXPECT_EQ(to_doubles(square(as_transposed(x))),
              quantize(map1(xs, [](double v) { return v * v; }), dt));
    EXPECT_EQ(to_doubles(sign(x)),
              map1(xs, [](double v) { return (v > 0) - (v < 0); }));
    if (!is_unsigned(dt)) {
      EXPECT_EQ(to_doubles(negative(x)), map1(xs, [](double v) { return -v; }));
    }
    auto inv = to_doubles(bitwise_invert(x));
    for (size_t i = 0; i < xs.size(); ++i) {
      int64_t v = static_cast<int64_t>(xs[i]);
      EXPECT_EQ(inv[i], to_doubles(array(~v, dt))[0]);
    }
  }
}

TEST(Elementwise, LogicalAndPredicates) {
  auto x = array({1.0f, NAN, INFINITY, -INFINITY, 0.0f});
  EXPECT_EQ(to_doubles(isnan(x)), (std::vector<double>{0, 1, 0, 0, 0}));
  EXPECT_EQ(to_doubles(isinf(x)), (std::vector<double>{0, 0, 1, 1, 0}));
  EXPECT_EQ(to_doubles(isposinf(x)), (std::vector<double>{0, 0, 1, 0, 0}));
  EXPECT_EQ(to_doubles(isneginf(x)), (std::vector<double>{0, 0, 0, 1, 0}));
  EXPECT_EQ(to_doubles(isfinite(x)), (std::vector<double>{1, 0, 0, 0, 1}));
  EXPECT_EQ(to_doubles(logical_not(x)), (std::vector<double>{0, 0, 0, 0, 1}));
  EXPECT_EQ(isnan(array({1, 2})).dtype(), bool_);
  EXPECT_EQ(to_doubles(isnan(array({1, 2}))), (std::vector<double>{0, 0}));
}

struct BinaryCase {
  const char* name;
  std::function<array(const array&, const array&)> op;
  std::function<double(double, double)> ref;
  bool float_only;
  bool to_bool;
};

double py_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

const std::vector<BinaryCase>& binary_cases() {
  static std::vector<BinaryCase> cases = {
      {"add", [](auto& a, auto& b) { return add(a, b); }, [](double a, double b) { return a + b; }, false, false},
      {"subtract", [](auto& a, auto& b) { return subtract(a, b); }, [](double a, double b) { return a - b; }, false, false},
      {"multiply", [](auto& a, auto& b) { return multiply(a, b); }, [](double a, double b) { return a * b; }, false, false},
      {"divide", [](auto& a, auto& b) { return divide(a, b); }, [](double a, double b) { return a / b; }, true, false},
      {"floor_divide", [](auto& a, auto& b) { return floor_divide(a, b); }, [](double a, double b) { return std::floor(a / b); }, false, false},
      {"remainder", [](auto& a, auto& b) { return remainder(a, b); }, py_mod, false, false},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); }, [](double a, double b) { return std::max(a, b); }, false, false},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); }, [](double a, double b) { return std::min(a, b); }, false, false},
      {"arctan2", [](auto& a, auto& b) { return arctan2(a, b); }, [](double a, double b) { return std::atan2(a, b); }, true, false},
      {"logaddexp", [](auto& a, auto& b) { return logaddexp(a, b); }, [](double a, double b) { return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b))); }, true, false},
      {"power", [](auto& a, auto& b) { return power(abs(a), b); }, [](double a, double b) { return std::pow(std::abs(a), b); }, true, false},
      {"equal", [](auto& a, auto& b) { return equal(a, b); }, [](double a, double b) { return double(a == b); }, false, true},
      {"not_equal", [](auto& a, auto& b) { return not_equal(a, b); }, [](double a, double b) { return double(a != b); }, false, true},
      {"less", [](auto& a, auto& b) { return less(a, b); }, [](double a, double b) { return double(a < b); }, false, true},
      {"less_equal", [](auto& a, auto& b) { return less_equal(a, b); }, [](double a, double b) { return double(a <= b); }, false, true},
      {"greater", [](auto& a, auto& b) { return greater(a, b); }, [](double a, double b) { return double(a > b); }, false, true},
      {"greater_equal", [](auto& a, auto& b) { return greater_equal(a, b); }, [](double a, double b) { return double(a >= b); }, false, true},
      {"logical_and", [](auto& a, auto& b) { return logical_and(a, b); }, [](double a, double b) { return double(a != 0 && b != 0); }, false, true},
      {"logical_or", [](auto& a, auto& b) { return logical_or(a, b); }, [](double a, double b) { return double(a != 0 || b != 0); }, false, true},
  };
  return cases;
}

TEST(Elementwise, BinaryOpsAllLayoutsAndDtypes) {
  for (auto& c : binary_cases()) {
    std::vector<Dtype> dts = float_dtypes();
    if (!c.float_only) {
      dts.insert(dts.end(), {int8, int32, int64, uint8, uint32});
    }
    for (Dtype dt : dts) {
      bool is_int = !is_inexact(dt);
      double lo = is_int ? (is_unsigned(dt) ? 1 : -9) : -3;
      // A small matrix, and one of several 32x32 tiles with partial ones
      // at its edges (the tiled walk of mixed layouts).
      for (Shape shape : {Shape{4, 6}, Shape{70, 45}}) {
      auto a = random_array(shape, dt, lo, 9);
      auto b = random_array(shape, dt, 1, 9); // nonzero divisors
      auto b_t = as_transposed(b);
      auto row = random_array({shape[1]}, dt, 1, 9);
      auto scalar = random_array({}, dt, 1, 9);
      // contiguous/contiguous, contiguous/transposed, transposed/contiguous,
      // transposed/transposed, vector/broadcast row, broadcast
      // row/transposed, scalar/array and array/scalar.
      std::vector<std::pair<array, array>> pairs = {
          {a, b},      {a, b_t},    {as_transposed(a), b},
          {as_transposed(a), b_t},  {a, row},    {row, b_t},
          {scalar, b}, {a, scalar}};
      for (auto& [x, y] : pairs) {
        auto out = c.op(x, y);
        auto xb = to_doubles(broadcast_to(x, out.shape()));
        auto yb = to_doubles(broadcast_to(y, out.shape()));
        auto want = map2(xb, yb, c.ref);
        Dtype odt = out.dtype();
        if (std::string(c.name) == "floor_divide" && is_inexact(dt)) {
          // floor(a / b) rounds the quotient to dt first, as the op does.
          want = map1(quantize(map2(xb, yb, std::divides<double>()), dt),
                      [](double v) { return std::floor(v); });
        }
        if (!c.to_bool) want = quantize(want, odt);
        double tol = c.to_bool ? 0 : tolerance(odt) * 4;
        EXPECT_TRUE(all_close(to_doubles(out), want, tol, tol))
            << c.name << " " << dt << " " << out.shape(0) << "x" << out.shape(1);
      }
      }
    }
  }
}

// power, arctan2 and logaddexp run through libmvec's SIMD pow, atan2, exp
// and log1p on contiguous float runs (x ** 2 as x * x, other integer
// powers on |x|): special values in every operand pattern,
// against the scalar functions in double, NaN for NaN, and signed zeros
// and infinities exactly.
TEST(Elementwise, PowerAndArcTan2SpecialValues) {
  const double inf = INFINITY, nan = NAN;
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5,
                            inf, -inf, nan, 3.0, -3.0, 1e-3, 7.25};
  std::vector<double> ys = {0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0,
                            0.5, -0.5, inf, -inf, nan, 1.5, 100.0};
  std::vector<double> a, b;
  for (double x : xs) {
    for (double y : ys) a.push_back(x), b.push_back(y);
  }
  size_t n = a.size();
  auto same = [](double got, double want, Dtype dt) {
    if (std::isnan(want)) return std::isnan(got);
    if (want == 0 || std::isinf(want)) {
      return got == want && std::signbit(got) == std::signbit(want);
    }
    return std::abs(got - want) <= 4 * tolerance(dt) * std::abs(want);
  };
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    auto qa = quantize(a, dt), qb = quantize(b, dt);
    array x(qa.begin(), {int(n)}, dt), y(qb.begin(), {int(n)}, dt);
    struct Op {
      const char* name;
      std::function<array(const array&, const array&)> f;
      double (*ref)(double, double);
    };
    for (auto& op : {Op{"power", [](auto& p, auto& q) { return power(p, q); },
                        [](double p, double q) { return std::pow(p, q); }},
                     Op{"arctan2",
                        [](auto& p, auto& q) { return arctan2(p, q); },
                        [](double p, double q) { return std::atan2(p, q); }},
                     Op{"logaddexp",
                        [](auto& p, auto& q) { return logaddexp(p, q); },
                        [](double p, double q) {
                          if (std::isnan(p) || std::isnan(q)) return p + q;
                          double m = std::max(p, q);
                          if (std::isinf(m)) return m;
                          return m + std::log1p(std::exp(-std::abs(p - q)));
                        }}}) {
      // Both operands arrays, then each side one element.
      auto got = to_doubles(op.f(x, y));
      for (size_t i = 0; i < n; ++i) {
        double want = quantize({op.ref(qa[i], qb[i])}, dt)[0];
        ASSERT_TRUE(same(got[i], want, dt))
            << op.name << "(" << qa[i] << ", " << qb[i] << ") " << dt
            << ": " << got[i] << ", want " << want;
      }
      for (size_t k = 0; k < xs.size(); ++k) {
        array s(quantize({xs[k]}, dt)[0], dt);
        auto left = to_doubles(op.f(s, y)), right = to_doubles(op.f(y, s));
        double v = to_doubles(s)[0];
        for (size_t i = 0; i < n; ++i) {
          double wl = quantize({op.ref(v, qb[i])}, dt)[0];
          double wr = quantize({op.ref(qb[i], v)}, dt)[0];
          ASSERT_TRUE(same(left[i], wl, dt)) << op.name << " scalar left " << v
                                             << ", " << qb[i] << " " << dt;
          ASSERT_TRUE(same(right[i], wr, dt)) << op.name << " " << qb[i]
                                              << ", scalar right " << v << " "
                                              << dt;
        }
      }
    }
    // x ** 2 is x * x, bit for bit.
    auto sq = to_doubles(power(x, array(2.0, dt)));
    auto xx = to_doubles(multiply(x, x));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE((std::isnan(sq[i]) && std::isnan(xx[i])) ||
                  (sq[i] == xx[i] && !std::signbit(sq[i])))
          << qa[i] << " ** 2 = " << sq[i] << " " << dt;
    }
  }
}

TEST(Elementwise, IntegerDivisionIsSafeAndFloored) {
  auto a = array({7, -7, 7, -7, 5, INT32_MIN}, int32);
  auto b = array({2, 2, -2, -2, 0, -1}, int32);
  EXPECT_EQ(to_doubles(floor_divide(a, b)),
            (std::vector<double>{3, -4, -4, 3, 0, double(INT32_MIN)}));
  EXPECT_EQ(to_doubles(remainder(a, b)),
            (std::vector<double>{1, 1, -1, -1, 0, 0}));
  // divide of integers is true division in float32
  auto d = divide(array({1, 3}), array({2, 2}));
  EXPECT_EQ(d.dtype(), float32);
  EXPECT_EQ(to_doubles(d), (std::vector<double>{0.5, 1.5}));
}

TEST(Elementwise, BitwiseAndShifts) {
  for (Dtype dt : {int8, int32, int64, uint8, uint16, uint64}) {
    auto a = random_array({5, 3}, dt, 0, 100);
    auto b = random_array({5, 3}, dt, 0, 7);
    auto xa = to_doubles(a), xb = to_doubles(b);
    auto ia = std::vector<int64_t>(xa.begin(), xa.end());
    auto ib = std::vector<int64_t>(xb.begin(), xb.end());
    auto check = [&](const array& out, auto f) {
      auto got = to_doubles(out);
      std::vector<double> want;
      for (size_t i = 0; i < ia.size(); ++i) want.push_back(double(f(ia[i], ib[i])));
      EXPECT_EQ(got, quantize(want, dt)) << dt;
    };
    check(bitwise_and(a, as_transposed(b)), [](int64_t x, int64_t y) { return x & y; });
    check(bitwise_or(a, b), [](int64_t x, int64_t y) { return x | y; });
    check(bitwise_xor(a, b), [](int64_t x, int64_t y) { return x ^ y; });
    check(left_shift(a, b), [](int64_t x, int64_t y) { return x << y; });
    check(right_shift(a, b), [](int64_t x, int64_t y) { return x >> y; });
  }
  // Oversized shift counts are defined, not undefined behaviour.
  EXPECT_EQ(to_doubles(left_shift(array({1}), array({40}))), std::vector<double>{0});
  EXPECT_EQ(to_doubles(right_shift(array({-8}), array({40}))), std::vector<double>{-1});
}

TEST(Elementwise, PromotionFollowsMLX) {
  EXPECT_EQ(promote_types(uint8, int8), int16);
  EXPECT_EQ(promote_types(uint32, int32), int64);
  EXPECT_EQ(promote_types(uint64, int8), float32);
  EXPECT_EQ(promote_types(float16, bfloat16), float32);
  EXPECT_EQ(promote_types(int64, float16), float16);
  EXPECT_EQ(promote_types(bool_, int8), int8);
  EXPECT_EQ(promote_types(float32, float64), float64);
  EXPECT_EQ(add(array(1, int8), array(1, uint8)).dtype(), int16);
  EXPECT_EQ(add(array(1.0f, float16), array(1.0f, bfloat16)).dtype(), float32);
  // A C++ scalar is weakly typed like a Python scalar.
  auto h = array({1.0f, 2.0f}, float16);
  EXPECT_EQ((h + 1.5).dtype(), float16);
  EXPECT_EQ((array({1, 2}) * 2).dtype(), int32);
  EXPECT_EQ((array({1, 2}) * 0.5).dtype(), float32);
}

TEST(Elementwise, WhereAndClip) {
  auto c = random_array({3, 4}, bool_);
  auto x = random_array({3, 4}, float32);
  auto y = random_array({4}, int32, -5, 5);
  auto w = where(c, as_transposed(x), y);
  EXPECT_EQ(w.dtype(), float32);
  auto cc = to_doubles(c), xx = to_doubles(x), yy = to_doubles(broadcast_to(y, {3, 4}));
  std::vector<double> want;
  for (size_t i = 0; i < cc.size(); ++i) want.push_back(cc[i] ? xx[i] : yy[i]);
  EXPECT_EQ(to_doubles(w), want);
  auto cl = clip(x, array(-0.5f), array(0.5f));
  EXPECT_EQ(to_doubles(cl), map1(xx, [](double v) {
              return std::clamp(v, -0.5, 0.5); }));
  EXPECT_THROW(clip(x, std::nullopt, std::nullopt), std::invalid_argument);
}

TEST(Elementwise, NaNPropagatesThroughMaxMin) {
  auto a = array({NAN, 1.0f, 2.0f});
  auto b = array({0.0f, NAN, 1.0f});
  auto mx = to_doubles(maximum(a, b)), mn = to_doubles(minimum(a, b));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]) && mx[2] == 2);
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && mn[2] == 1);
}

TEST(Elementwise, OutputInheritsContiguousLayout) {
  // Seed 000: elementwise ops on a transposed or broadcast input keep its
  // layout and never materialize the broadcast.
  auto t = as_transposed(random_array({64, 32}, float32));
  auto e = exp(t);
  e.eval();
  EXPECT_EQ(e.strides(), t.strides());
  EXPECT_TRUE(e.flags().col_contiguous);

  size_t before = get_active_memory();
  reset_peak_memory();
  auto big = broadcast_to(array({0.5f}), {16384, 2048, 16});
  auto y = exp(big);
  y.eval();
  EXPECT_EQ(y.data_size(), 1u);
  EXPECT_EQ(y.strides(), (Strides{0, 0, 0}));
  EXPECT_LT(peak_above(before), 1024u);
  EXPECT_FLOAT_EQ(y.data<float>()[0], std::exp(0.5f));

  // Mixed layouts fall back to a correct row-major result.
  auto r = random_array({32, 64}, float32);
  auto m = add(r, transpose(random_array({64, 32}, float32)));
  m.eval();
  EXPECT_TRUE(m.flags().row_contiguous);
}

TEST(Elementwise, DonatesInputBuffers) {
  auto x = random_array({1000}, float32);
  auto want = map1(to_doubles(x), [](double v) { return std::exp(std::sin(v)); });
  auto y = exp(sin(x));
  x = array(0.0f); // drop our handle: sin's output is used only by exp
  size_t before = get_active_memory();
  reset_peak_memory();
  y.eval();
  // sin's buffer is reused by exp: at most one new buffer of 4000 bytes
  EXPECT_LE(peak_above(before), 4000u + 64);
  EXPECT_TRUE(all_close(to_doubles(y), want, 1e-6, 1e-6));
}

TEST(Elementwise, BadInputRaisesWithShapesAndDtypes) {
  auto a = random_array({2, 3}, float32);
  auto b = random_array({4}, float32);
  try {
    add(a, b);
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[add]"), std::string::npos);
    EXPECT_NE(msg.find("(2, 3)"), std::string::npos);
    EXPECT_NE(msg.find("(4,)"), std::string::npos);
  }
  try {
    bitwise_and(a, a);
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[bitwise_and]"), std::string::npos);
    EXPECT_NE(msg.find("float32"), std::string::npos);
  }
  EXPECT_THROW(bitwise_invert(a), std::invalid_argument);
  EXPECT_THROW(left_shift(a, a), std::invalid_argument);
  EXPECT_THROW(negative(array({true})), std::invalid_argument);
}

TEST(Elementwise, Complex64ComparisonsOrderAsMlx) {
  // By real part, then imaginary part; a NaN part makes every order
  // comparison false. Against a loop over every pair, in both argument
  // orders, with a transposed operand.
  const float nan = NAN;
  std::vector<complex64_t> v = {{1, 2}, {1, 3}, {0, 5}, {2, -1},
                                {1, 2}, {nan, 0}, {1, nan}, {-1, 0}};
  int n = static_cast<int>(v.size());
  std::vector<complex64_t> av, bv;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      av.push_back(v[i]);
      bv.push_back(v[j]);
    }
  }
  array a(av, {n, n}, complex64), b(bv, {n, n}, complex64);
  array bt = as_transposed(b);
  auto lt = to_doubles(less(a, bt)), le = to_doubles(less_equal(a, bt));
  auto gt = to_doubles(greater(a, bt)), ge = to_doubles(greater_equal(a, bt));
  for (int k = 0; k < n * n; ++k) {
    complex64_t x = av[k], y = bv[k];
    bool x_nan = std::isnan(x.real()) || std::isnan(x.imag());
    bool y_nan = std::isnan(y.real()) || std::isnan(y.imag());
    bool before = complex_before(x, y), after = complex_before(y, x);
    bool same = !x_nan && !y_nan && x == y;
    EXPECT_EQ(lt[k], before) << k;
    EXPECT_EQ(gt[k], after) << k;
    EXPECT_EQ(le[k], before || same) << k;
    EXPECT_EQ(ge[k], after || same) << k;
  }
}

TEST(Elementwise, IsCloseAllCloseArrayEqual) {
  auto a = array({1.0f, 2.0f, NAN, INFINITY});
  auto b = array({1.0f + 1e-7f, 2.1f, NAN, INFINITY});
  EXPECT_EQ(to_doubles(isclose(a, b)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(to_doubles(isclose(a, b, 1e-5, 1e-8, true)),
            (std::vector<double>{1, 0, 1, 1}));
  EXPECT_FALSE(allclose(a, b).item<bool>());
  EXPECT_TRUE(allclose(array({1.0f, 2.0f}), array({1.0f, 2.0f + 1e-6f})).item<bool>());
  EXPECT_TRUE(array_equal(array({1, 2}), array({1.0f, 2.0f})).item<bool>());
  EXPECT_FALSE(array_equal(array({1, 2}), array({1, 2, 3})).item<bool>());
  EXPECT_FALSE(array_equal(a, a).item<bool>());
  EXPECT_TRUE(array_equal(a, a, true).item<bool>());
}

} // namespace
} // namespace kiln::test
