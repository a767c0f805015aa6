// GPU elementwise kernels (unary, binary, Select, astype and copies) against
// the CPU backend on random inputs of every dtype and layout: values, and
// the output layout rule (a shared contiguous layout is inherited).
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuElementwise = GpuTest;

using UnaryFn = std::function<array(const array&, Device)>;

struct UnaryCase {
  const char* name;
  UnaryFn fn;
  double lo, hi; // input domain
};

#define KILN_UNARY_CASE(f, lo, hi) \
  {#f, [](const array& x, Device d) { return f(x, d); }, lo, hi}

const std::vector<UnaryCase>& float_unaries() {
  static const std::vector<UnaryCase> cases = {
      KILN_UNARY_CASE(abs, -2, 2),          KILN_UNARY_CASE(negative, -2, 2),
      KILN_UNARY_CASE(sign, -2, 2),        KILN_UNARY_CASE(square, -2, 2),
      KILN_UNARY_CASE(exp, -2, 2),          KILN_UNARY_CASE(expm1, -2, 2),
      KILN_UNARY_CASE(log, 0.1, 3),         KILN_UNARY_CASE(log1p, -0.5, 3),
      KILN_UNARY_CASE(log2, 0.1, 3),       KILN_UNARY_CASE(log10, 0.1, 3),
      KILN_UNARY_CASE(sin, -3, 3),          KILN_UNARY_CASE(cos, -3, 3),
      KILN_UNARY_CASE(tan, -1, 1),          KILN_UNARY_CASE(arcsin, -0.9, 0.9),
      KILN_UNARY_CASE(arccos, -0.9, 0.9), KILN_UNARY_CASE(arctan, -3, 3),
      KILN_UNARY_CASE(sinh, -2, 2),        KILN_UNARY_CASE(cosh, -2, 2),
      KILN_UNARY_CASE(tanh, -2, 2),        KILN_UNARY_CASE(arcsinh, -2, 2),
      KILN_UNARY_CASE(arccosh, 1.1, 3), KILN_UNARY_CASE(arctanh, -0.9, 0.9),
      KILN_UNARY_CASE(sqrt, 0.1, 3),       KILN_UNARY_CASE(rsqrt, 0.1, 3),
      KILN_UNARY_CASE(sigmoid, -4, 4),  KILN_UNARY_CASE(erf, -2, 2),
      KILN_UNARY_CASE(erfinv, -0.9, 0.9), KILN_UNARY_CASE(floor, -3, 3),
      KILN_UNARY_CASE(ceil, -3, 3),        {"round", [](const array& x, Device d) { return round(x, 0, d); }, -3, 3},
      KILN_UNARY_CASE(stop_gradient, -2, 2),
  };
  return cases;
}

TEST_F(GpuElementwise, UnaryFloatEveryLayout) {
  for (Dtype dt : float_dtypes()) {
    for (auto& c : float_unaries()) {
      array x = random_array({37, 53}, dt, c.lo, c.hi);
      for (auto& [layout, in] : layouts(x)) {
        auto fn = [&](const std::vector<array>& v, Device d) {
          return c.fn(v[0], d);
        };
        EXPECT_TRUE(same_on_devices(fn, {in}, tolerance(dt)))
            << c.name << " " << dtype_name(dt) << " " << layout;
      }
    }
  }
}

// tanh of bfloat16 takes the SFU's approximation (OpFor in unary_ops.cuh),
// claimed to round as tanhf does for every input: all 65536 bit patterns,
// unfused and in a fused region, against tanh in double rounded to
// bfloat16 (only values within 2^-20 of a rounding midpoint may round
// either way), and the two bit for bit.
TEST_F(GpuElementwise, TanhBfloat16EveryValue) {
  std::vector<uint16_t> bits(65536);
  std::iota(bits.begin(), bits.end(), uint16_t(0));
  array x = view(array(bits, {65536}, uint16), bfloat16);
  array g = tanh(x, Device::gpu);
  auto region = compile([](const std::vector<array>& v) {
    return std::vector<array>{tanh(multiply(v[0], array(1.0f, bfloat16)))};
  });
  array f = [&] {
    DefaultDeviceScope scope(Device::gpu);
    return region({x})[0];
  }();
  array gb = view(g, uint16), fb = view(f, uint16);
  eval({gb, fb});
  const uint16_t* got = gb.data<uint16_t>();
  const uint16_t* fused = fb.data<uint16_t>();
  auto value = [](uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return double(v);
  };
  int wrong = 0, differ = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    double in = value(uint16_t(i)), exact = std::tanh(in);
    double out = value(got[i]);
    differ += got[i] != fused[i];
    if (std::isnan(in)) {
      wrong += !std::isnan(out);
      continue;
    }
    // One bfloat16 ulp at the result: 2^(exponent - 7), subnormals 2^-133.
    int e;
    std::frexp(exact == 0 ? 1e-300 : exact, &e);
    double ulp = std::ldexp(1.0, std::max(e - 8, -133));
    double err = std::fabs(out - exact);
    bool ok = err <= 0.5 * ulp ||
              (err <= 0.5 * ulp + std::fabs(exact) * std::ldexp(1.0, -20));
    // tanh(+-0) keeps the zero's sign.
    if (exact == 0) ok = out == 0 && std::signbit(out) == std::signbit(in);
    if (!ok && wrong++ < 5) {
      ADD_FAILURE() << "tanh(bfloat16 0x" << std::hex << i << std::dec
                    << " = " << in << ") = " << out << ", exact " << exact;
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(differ, 0) << "fused and unfused tanh differ";
}

TEST_F(GpuElementwise, UnaryIntegerAndBool) {
  for (Dtype dt : all_dtypes()) {
    if (dt == complex64 || issubdtype(dt, floating)) continue;
    array x = random_array({29, 41}, dt, -50, 50);
    for (auto& [layout, in] : layouts(x)) {
      std::vector<UnaryFn> fns = {
          [](const array& x, Device d) { return abs(x, d); },
          [](const array& x, Device d) {
            // negative refuses bool (logical_not is its bool form).
            return x.dtype() == bool_ ? logical_not(x, d) : negative(x, d);
          },
          [](const array& x, Device d) { return sign(x, d); },
          [](const array& x, Device d) { return square(x, d); },
          [](const array& x, Device d) { return logical_not(x, d); }};
      for (auto& f : fns) {
        auto fn = [&](const std::vector<array>& v, Device d) {
          return f(v[0], d);
        };
        EXPECT_TRUE(same_on_devices(fn, {in}, 0)) << dtype_name(dt) << layout;
      }
      if (dt != bool_) {
        auto fn = [&](const std::vector<array>& v, Device d) {
          return bitwise_invert(v[0], d);
        };
        EXPECT_TRUE(same_on_devices(fn, {in}, 0)) << dtype_name(dt) << layout;
      }
    }
  }
}

using Binary = array (*)(const array&, const array&, StreamOrDevice);

TEST_F(GpuElementwise, BinaryEveryDtypeAndLayout) {
  std::vector<std::pair<const char*, Binary>> arith = {
      {"add", add},         {"subtract", subtract},
      {"multiply", multiply}, {"divide", divide},
      {"maximum", maximum}, {"minimum", minimum},
      {"floor_divide", floor_divide}, {"remainder", remainder},
      {"equal", equal},     {"not_equal", not_equal},
      {"less", less},       {"less_equal", less_equal},
      {"greater", greater}, {"greater_equal", greater_equal},
      {"logical_and", logical_and}, {"logical_or", logical_or},
  };
  for (Dtype dt : all_dtypes()) {
    if (dt == complex64 || dt == bool_) continue;
    array a = random_array({33, 47}, dt, -20, 20);
    array b = random_array({33, 47}, dt, 1, 9); // divisors stay nonzero
    auto la = layouts(a), lb = layouts(b);
    for (size_t i = 0; i < la.size(); ++i) {
      for (size_t j = 0; j < lb.size(); ++j) {
        // Equal layouts, and each layout against a contiguous operand.
        if (i != j && i != 0 && j != 0) continue;
        for (auto& [name, f] : arith) {
          auto fn = [&](const std::vector<array>& v, Device d) {
            return f(v[0], v[1], d);
          };
          EXPECT_TRUE(same_on_devices(fn, {la[i].second, lb[j].second},
                                      tolerance(dt)))
              << name << " " << dtype_name(dt) << " " << la[i].first << "/"
              << lb[j].first;
        }
      }
    }
  }
}

TEST_F(GpuElementwise, BinaryScalarsAndMixedKinds) {
  for (Dtype dt : {float32, bfloat16, int32, uint8}) {
    array a = random_array({64, 33}, dt, 1, 9);
    array s = astype(array(3), dt);
    for (auto [x, y] : {std::pair{a, s}, std::pair{s, a}, std::pair{s, s}}) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return power(v[0], v[1], d);
      };
      EXPECT_TRUE(same_on_devices(fn, {x, y}, tolerance(dt)))
          << dtype_name(dt);
    }
  }
  for (Dtype dt : float_dtypes()) {
    array a = random_array({40, 24}, dt, 0.5, 2);
    array b = random_array({40, 24}, dt, -2, 2);
    for (Binary f : {power, arctan2, logaddexp}) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return f(v[0], v[1], d);
      };
      EXPECT_TRUE(same_on_devices(fn, {a, as_transposed(b)}, tolerance(dt)))
          << dtype_name(dt);
    }
  }
  for (Dtype dt : int_dtypes()) {
    array a = random_array({30, 20}, dt, 0, 100);
    array b = random_array({30, 20}, dt, 0, 5);
    for (Binary f : {bitwise_and, bitwise_or, bitwise_xor, left_shift,
                     right_shift}) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return f(v[0], v[1], d);
      };
      EXPECT_TRUE(same_on_devices(fn, {as_transposed(a), b}, 0))
          << dtype_name(dt);
    }
  }
}

TEST_F(GpuElementwise, SharedTransposedLayoutIsInherited) {
  array a = as_transposed(random_array({64, 96}, float32));
  array b = as_transposed(random_array({64, 96}, float32));
  array out = add(a, b, Device::gpu);
  eval(out);
  EXPECT_EQ(out.strides(), a.strides());
  EXPECT_FALSE(out.flags().row_contiguous);
  EXPECT_TRUE(out.flags().col_contiguous);
  // A broadcast scalar chain stays one element.
  array s = broadcast_to(array(2.0f), {1 << 12, 1 << 12});
  array e = exp(sin(s, Device::gpu), Device::gpu);
  eval(e);
  EXPECT_EQ(e.data_size(), 1u);
  EXPECT_NEAR(e.data<float>()[0], std::exp(std::sin(2.0f)), 1e-6);
}

TEST_F(GpuElementwise, SelectEveryDtypeAndLayout) {
  for (Dtype dt : all_dtypes()) {
    if (dt == complex64) continue;
    array c = greater(random_array({31, 45}, float32), array(0.0f));
    array a = random_array({31, 45}, dt);
    array b = random_array({31, 45}, dt);
    auto lc = layouts(c), la = layouts(a), lb = layouts(b);
    for (size_t i = 0; i < la.size(); ++i) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return where(v[0], v[1], v[2], d);
      };
      EXPECT_TRUE(same_on_devices(
          fn, {lc[i].second, la[i].second, lb[(i + 1) % lb.size()].second}, 0))
          << dtype_name(dt) << " " << la[i].first;
      EXPECT_TRUE(same_on_devices(fn, {lc[0].second, a, array(1.5f)}, 0))
          << dtype_name(dt) << " scalar";
    }
  }
}

TEST_F(GpuElementwise, AsTypeEveryPairAndLayout) {
  for (Dtype from : all_dtypes()) {
    if (from == complex64) continue;
    array x = random_array({23, 35}, from, -100, 100);
    for (Dtype to : all_dtypes()) {
      if (to == complex64) continue;
      // Out-of-range float -> integer casts are undefined in C++ and
      // differ between devices: keep the values in range of every type.
      bool narrow = issubdtype(to, integer) && issubdtype(from, floating);
      array in = narrow ? abs(x) : x;
      for (auto& [layout, v] : layouts(in)) {
        auto fn = [&](const std::vector<array>& a, Device d) {
          return astype(a[0], to, d);
        };
        EXPECT_TRUE(same_on_devices(fn, {v}, tolerance(to)))
            << dtype_name(from) << " -> " << dtype_name(to) << " " << layout;
      }
    }
  }
}

TEST_F(GpuElementwise, ComplexOpsEveryLayout) {
  // The ops with complex64 kernels against the CPU's std::complex, to float
  // rounding. |Re z|, |Im z| < 1 keep tan and tanh away from their poles
  // (pi / 2 away), where the two libraries' roundings would diverge.
  array z = complex_random({23, 35}, -1, 1);
  array w = complex_random({23, 35}, -2, 2);
  const std::vector<UnaryCase> unaries = {
      KILN_UNARY_CASE(negative, 0, 0), KILN_UNARY_CASE(sign, 0, 0),
      KILN_UNARY_CASE(square, 0, 0),   KILN_UNARY_CASE(exp, 0, 0),
      KILN_UNARY_CASE(log, 0, 0),      KILN_UNARY_CASE(log10, 0, 0),
      KILN_UNARY_CASE(log1p, 0, 0),    KILN_UNARY_CASE(log2, 0, 0),
      KILN_UNARY_CASE(sin, 0, 0),      KILN_UNARY_CASE(cos, 0, 0),
      KILN_UNARY_CASE(tan, 0, 0),      KILN_UNARY_CASE(sinh, 0, 0),
      KILN_UNARY_CASE(cosh, 0, 0),     KILN_UNARY_CASE(tanh, 0, 0),
      KILN_UNARY_CASE(sqrt, 0, 0),     KILN_UNARY_CASE(rsqrt, 0, 0),
      KILN_UNARY_CASE(conjugate, 0, 0), KILN_UNARY_CASE(abs, 0, 0),
      KILN_UNARY_CASE(real, 0, 0),     KILN_UNARY_CASE(imag, 0, 0)};
  for (auto& [layout, v] : layouts(z)) {
    for (auto& c : unaries) {
      auto fn = [&](const std::vector<array>& a, Device d) {
        return c.fn(a[0], d);
      };
      EXPECT_TRUE(same_on_devices(fn, {v}, 2e-5)) << c.name << " " << layout;
    }
    for (auto& [wl, u] : layouts(w)) {
      auto check = [&](const char* name, auto op) {
        auto fn = [&](const std::vector<array>& a, Device d) {
          return op(a[0], a[1], d);
        };
        EXPECT_TRUE(same_on_devices(fn, {v, u}, 2e-5, layout == wl))
            << name << " " << layout << " " << wl;
      };
      check("add", [](auto& a, auto& b, Device d) { return add(a, b, d); });
      check("subtract",
            [](auto& a, auto& b, Device d) { return subtract(a, b, d); });
      check("multiply",
            [](auto& a, auto& b, Device d) { return multiply(a, b, d); });
      check("divide",
            [](auto& a, auto& b, Device d) { return divide(a, b, d); });
    }
  }
  // Comparisons see equal values, Select picks per element, scalars
  // broadcast, and casts go both ways.
  array mask = greater(random_array({23, 35}, float32), array(0.5f));
  array some = where(mask, z, w);
  auto fn2 = [](auto op) {
    return [op](const std::vector<array>& a, Device d) {
      return op(a[0], a[1], d);
    };
  };
  EXPECT_TRUE(same_on_devices(
      fn2([](auto& a, auto& b, Device d) { return equal(a, b, d); }),
      {some, z}, 0));
  EXPECT_TRUE(same_on_devices(
      fn2([](auto& a, auto& b, Device d) { return not_equal(a, b, d); }),
      {as_transposed(some), as_transposed(w)}, 0));
  EXPECT_TRUE(same_on_devices(
      [&](const std::vector<array>& a, Device d) {
        return where(mask, a[0], a[1], d);
      },
      {z, w}, 0));
  EXPECT_TRUE(same_on_devices(
      fn2([](auto& a, auto& b, Device d) { return multiply(a, b, d); }),
      {z, array(complex64_t(0.5f, -2.0f))}, 2e-5));
  for (Dtype dt : {float32, float16, int32, bool_, float64}) {
    array x = random_array({23, 35}, dt, -3, 3);
    EXPECT_TRUE(same_on_devices(
        [](const std::vector<array>& a, Device d) {
          return astype(a[0], complex64, d);
        },
        {as_transposed(x)}, 0))
        << dtype_name(dt);
    EXPECT_TRUE(same_on_devices(
        [dt](const std::vector<array>& a, Device d) {
          return astype(a[0], dt, d);
        },
        {z}, tolerance(dt)))
        << dtype_name(dt);
  }
}

// re + i * im with ties in both parts (halves of small integers) and a NaN
// in one part of every 7th value (the real part of every other one).
array complex_ties(const Shape& shape) {
  std::vector<double> re = to_doubles(random_array(shape, int32, -4, 4));
  std::vector<double> im = to_doubles(random_array(shape, int32, -4, 4));
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < re.size(); ++i) {
    re[i] /= 2;
    im[i] /= 2;
    if (i % 7 == 3) (i % 2 ? re[i] : im[i]) = nan;
  }
  auto part = [&](const std::vector<double>& v) {
    return astype(array(v.begin(), shape, float64), complex64);
  };
  return add(part(re), multiply(part(im), array(complex64_t(0, 1))));
}

TEST_F(GpuElementwise, ComplexInverseFunctionsPowerAndLogic) {
  // The inverse trigonometric and hyperbolic functions (double on the GPU,
  // glibc's float functions on the CPU), on random values and on their
  // branch cuts with both signs of zero, where the side taken shows;
  // power, and the logical ops (a value is true when either part is not
  // zero).
  array z = complex_random({17, 29}, -3, 3);
  std::vector<complex64_t> cut;
  for (float r : {-3.0f, -2.0f, -1.5f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f,
                  2.0f, 3.0f}) {
    for (float zero : {0.0f, -0.0f}) {
      cut.push_back(complex64_t(r, zero));
      cut.push_back(complex64_t(zero, r));
    }
  }
  array on_cuts(cut.begin(), {static_cast<int>(cut.size())}, complex64);
  const std::vector<UnaryCase> inverses = {
      KILN_UNARY_CASE(arcsin, 0, 0),  KILN_UNARY_CASE(arccos, 0, 0),
      KILN_UNARY_CASE(arctan, 0, 0),  KILN_UNARY_CASE(arcsinh, 0, 0),
      KILN_UNARY_CASE(arccosh, 0, 0), KILN_UNARY_CASE(arctanh, 0, 0),
      KILN_UNARY_CASE(logical_not, 0, 0)};
  for (auto& c : inverses) {
    auto fn = [&](const std::vector<array>& a, Device d) {
      return c.fn(a[0], d);
    };
    for (auto& [layout, v] : layouts(z)) {
      EXPECT_TRUE(same_on_devices(fn, {v}, 2e-5)) << c.name << " " << layout;
    }
    // On the cuts the infinities of atanh(+-1) and atan(+-i) compare as
    // values; signed zeros are checked by the signs of the parts.
    EXPECT_TRUE(same_on_devices(fn, {on_cuts}, 2e-5)) << c.name << " cuts";
    array g = c.fn(on_cuts, Device::gpu), h = c.fn(on_cuts, Device::cpu);
    if (g.dtype() == complex64) {
      auto gr = to_doubles(real(g, Device::cpu)), hr = to_doubles(real(h, Device::cpu));
      auto gi = to_doubles(imag(g, Device::cpu)), hi = to_doubles(imag(h, Device::cpu));
      for (size_t i = 0; i < gr.size(); ++i) {
        EXPECT_EQ(std::signbit(gr[i]), std::signbit(hr[i])) << c.name << " " << i;
        EXPECT_EQ(std::signbit(gi[i]), std::signbit(hi[i])) << c.name << " " << i;
      }
    }
  }
  // Power: random bases and exponents (and exact zero bases, with the
  // CPU's results for them). glibc's cpowf rounds in float (up to 1.4e-6
  // of |x^y| measured against double), which a part much smaller than the
  // whole carries: the exponents keep |x^y| under 70.
  array base = complex_random({13, 21}, -2, 2);
  array expo = complex_random({13, 21}, -1, 1);
  auto pw = [](const std::vector<array>& a, Device d) {
    return power(a[0], a[1], d);
  };
  for (auto& [layout, v] : layouts(base)) {
    EXPECT_TRUE(same_on_devices(pw, {v, expo}, 2e-4, false)) << layout;
  }
  std::vector<complex64_t> zeros(6, complex64_t(0.0f, 0.0f));
  std::vector<complex64_t> powers = {
      complex64_t(2, 0),  complex64_t(0, 0), complex64_t(-1, 0),
      complex64_t(0, 1),  complex64_t(2, 1), complex64_t(-1, 1)};
  EXPECT_TRUE(same_on_devices(
      pw, {array(zeros.begin(), {6}, complex64), array(powers.begin(), {6}, complex64)},
      0));
  // Logic: parts zero or not in every combination.
  std::vector<complex64_t> parts = {complex64_t(0, 0), complex64_t(0, 1),
                                    complex64_t(2, 0), complex64_t(-1, -1)};
  std::vector<complex64_t> xs, ys;
  for (auto x : parts) {
    for (auto y : parts) {
      xs.push_back(x);
      ys.push_back(y);
    }
  }
  array xa(xs.begin(), {16}, complex64), ya(ys.begin(), {16}, complex64);
  using Binary = array (*)(const array&, const array&, StreamOrDevice);
  for (Binary op : {Binary(logical_and), Binary(logical_or)}) {
    auto fn = [op](const std::vector<array>& a, Device d) {
      return op(a[0], a[1], d);
    };
    EXPECT_TRUE(same_on_devices(fn, {xa, ya}, 0));
  }
}

TEST_F(GpuElementwise, ComplexOrderAndRounding) {
  // The order MLX gives complex values (real part, then imaginary part) in
  // the comparisons and maximum/minimum, NaN parts included; round (halves
  // to even, each part) and equality with equal NaNs. Exact against the CPU.
  array z = complex_ties({19, 27});
  array w = complex_ties({19, 27});
  using Binary = array (*)(const array&, const array&, StreamOrDevice);
  const std::vector<std::pair<const char*, Binary>> binaries = {
      {"less", less},       {"less_equal", less_equal},
      {"greater", greater}, {"greater_equal", greater_equal},
      {"maximum", maximum}, {"minimum", minimum}};
  for (auto& [layout, v] : layouts(z)) {
    for (auto& [name, op] : binaries) {
      auto fn = [op](const std::vector<array>& a, Device d) {
        return op(a[0], a[1], d);
      };
      EXPECT_TRUE(same_on_devices(fn, {v, w}, 0, false))
          << name << " " << layout;
      EXPECT_TRUE(same_on_devices(fn, {w, v}, 0, false))
          << name << " " << layout << " swapped";
    }
    auto rounded = [](const std::vector<array>& a, Device d) {
      return round(multiply(a[0], array(complex64_t(1.5f, 0)), d), 0, d);
    };
    EXPECT_TRUE(same_on_devices(rounded, {v}, 0)) << "round " << layout;
  }
  for (bool equal_nan : {false, true}) {
    auto same = [equal_nan](const std::vector<array>& a, Device d) {
      return array_equal(a[0], a[1], equal_nan, d);
    };
    EXPECT_TRUE(same_on_devices(same, {z, negative(negative(z))}, 0))
        << equal_nan;
  }
}

// Random values of dtype dt in [-3, 3), complex64 ones in both parts.
array random_values(const Shape& shape, Dtype dt) {
  if (dt != complex64) return random_array(shape, dt, -3, 3);
  auto part = [&] { return astype(random_array(shape, float32, -3, 3), dt); };
  return add(part(), multiply(part(), array(complex64_t(0, 1))));
}

TEST_F(GpuElementwise, ContiguousCopiesEveryLayout) {
  // complex64 too: its copies move the values as uint64.
  for (Dtype dt : all_dtypes()) {
    array x = random_values({3, 17, 29}, dt);
    std::vector<array> views = {
        transpose(x, {2, 0, 1}),
        slice(x, Shape{0, 1, 2}, Shape{3, 17, 29}, Shape{2, 3, 5}),
        broadcast_to(slice(x, Shape{0, 0, 0}, Shape{1, 17, 29}), {4, 17, 29}),
        reshape(transpose(x, {1, 0, 2}), {17, 87}),
    };
    for (auto& v : views) {
      array g = contiguous(v, false, Device::gpu);
      eval(g);
      EXPECT_TRUE(g.flags().row_contiguous);
      if (dt == complex64) {
        EXPECT_TRUE(all_close(to_doubles(real(g)), to_doubles(real(v)), 0, 0));
        EXPECT_TRUE(all_close(to_doubles(imag(g)), to_doubles(imag(v)), 0, 0));
        continue;
      }
      EXPECT_TRUE(all_close(to_doubles(g), to_doubles(v), 0, 0))
          << dtype_name(dt);
    }
  }
}

TEST_F(GpuElementwise, LargeIndexGeneralKernel) {
  // 65537 x 65536 bytes passes 2^32 elements: the general kernel takes
  // 64-bit indices. Check corners and a middle block, copied out on the GPU.
  int r = 65537, c = 65536;
  array a = astype(arange(0, r, 1, int32), uint8);
  array b = astype(arange(0, c, 1, int32), uint8);
  array out = add(reshape(a, {r, 1}), reshape(b, {1, c}), Device::gpu);
  eval(out);
  ASSERT_GT(out.size(), size_t(UINT32_MAX));
  for (auto [i, j] : {std::pair{0, 0}, std::pair{r - 1, c - 1},
                      std::pair{40000, 30000}, std::pair{r - 1, 5}}) {
    array blk = contiguous(slice(out, Shape{i, j}, Shape{i + 1, j + 1}), false,
                           Device::gpu);
    EXPECT_EQ(blk.item<uint8_t>(), static_cast<uint8_t>((i % 256) + (j % 256)))
        << i << "," << j;
  }
}

TEST_F(GpuElementwise, EmptyArrays) {
  array x = random_array({0, 4}, float32);
  array y = exp(x, Device::gpu);
  eval(y);
  EXPECT_EQ(y.size(), 0u);
  array z = add(x, x, Device::gpu);
  eval(z);
  EXPECT_EQ(z.shape(), (Shape{0, 4}));
}

// Same-dtype copies whose innermost dimension is contiguous on both sides
// move 8-byte chunks (elementwise.cpp's as_chunks): heads transposed as
// attention code does, inner extents that do and do not split into chunks,
// views starting off a chunk boundary, and concatenation (copy_into).
TEST_F(GpuElementwise, CopiesInEightByteChunks) {
  for (Dtype dt : all_dtypes()) {
    if (dt == complex64) continue; // copied through the CPU
    for (int d : {8, 6, 3, 16}) {
      array x = random_array({2, 5, 3, d}, dt, -3, 3);
      std::vector<std::pair<std::string, array>> views = {
          {"heads transposed", transpose(x, {0, 2, 1, 3})},
          {"batch transposed", transpose(x, {1, 0, 2, 3})},
          {"offset by one", slice(x, Shape{0, 0, 0, 1}, Shape{2, 5, 3, d})},
          {"row slice", slice(x, Shape{0, 1, 0, 0}, Shape{2, 5, 2, d})},
      };
      for (auto& [name, v] : views) {
        auto copy = [](const std::vector<array>& in, Device dev) {
          return contiguous(in[0], false, dev);
        };
        EXPECT_TRUE(same_on_devices(copy, {v}, 0))
            << dtype_name(dt) << " d=" << d << " " << name;
        auto cat = [](const std::vector<array>& in, Device dev) {
          return concatenate({in[0], in[0]}, 1, dev);
        };
        EXPECT_TRUE(same_on_devices(cat, {v}, 0))
            << "concatenate " << dtype_name(dt) << " d=" << d << " " << name;
      }
    }
  }
}

// Copies that transpose (the output's innermost axis strided in the input,
// another axis contiguous there, both 16 or longer) run in 32 x 32 tiles
// (elementwise.cpp's transposed_copy): every element size, extents off the
// tile, planes of other axes on both sides, views sliced, offset and
// reversed, the batch moved innermost as a depthwise convolution's weight
// gradient does, through contiguous and concatenate (copy_into); a side of
// 15 stays on the general kernel.
TEST_F(GpuElementwise, TransposingCopiesInTiles) {
  for (Dtype dt : all_dtypes()) {
    array x = random_values({6, 37, 45}, dt);
    array nhwc = random_array({33, 5, 4, 40}, dt == complex64 ? float32 : dt,
                              -3, 3);
    std::vector<std::pair<std::string, array>> views = {
        {"matrix", transpose(slice(x, Shape{2, 0, 0}, Shape{3, 37, 45}),
                             {0, 2, 1})},
        {"planes", transpose(x, {2, 0, 1})},
        {"planes inside", transpose(x, {0, 2, 1})},
        {"sliced, offset", transpose(slice(x, Shape{1, 3, 2}, Shape{5, 37, 45},
                                           Shape{1, 1, 1}),
                                     {0, 2, 1})},
        {"reversed rows", transpose(slice(x, Shape{0, 36, 0}, Shape{6, -38, 45},
                                          Shape{1, -1, 1}),
                                    {0, 2, 1})},
        {"batch innermost", transpose(nhwc, {1, 2, 3, 0})},
        {"batch back out", transpose(contiguous(transpose(nhwc, {1, 2, 3, 0})),
                                     {3, 0, 1, 2})},
        {"15 wide (general kernel)",
         transpose(slice(x, Shape{0, 0, 0}, Shape{6, 15, 45}), {0, 2, 1})},
    };
    for (auto& [name, v] : views) {
      auto copy = [](const std::vector<array>& in, Device dev) {
        return contiguous(in[0], false, dev);
      };
      EXPECT_TRUE(same_on_devices(copy, {v}, 0))
          << dtype_name(dt) << " " << name;
      auto cat = [](const std::vector<array>& in, Device dev) {
        return concatenate({in[0], in[0]}, 0, dev);
      };
      EXPECT_TRUE(same_on_devices(cat, {v}, 0))
          << "concatenate " << dtype_name(dt) << " " << name;
    }
  }
}

} // namespace
} // namespace kiln::test
