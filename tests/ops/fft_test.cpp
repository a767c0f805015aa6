// kiln::fft against a float64 DFT written here (O(n^2) per line): every
// axis set, input dtype family and layout, sizes cut and padded, the three
// norms, real transforms of odd and even lengths, lengths of every kind of
// factorization (powers of two, mixed radices, primes), the frequency
// helpers and shifts, and bad input.
#include <cmath>
#include <complex>
#include <numbers>

#include "kiln/ops/utils.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

using cd = std::complex<double>;

// A row-major complex tensor in double precision.
struct Tensor {
  Shape shape;
  std::vector<cd> v;
  int64_t inner(int axis) const {
    int64_t p = 1;
    for (size_t i = axis + 1; i < shape.size(); ++i) p *= shape[i];
    return p;
  }
  int64_t outer(int axis) const {
    int64_t p = 1;
    for (int i = 0; i < axis; ++i) p *= shape[i];
    return p;
  }
};

Tensor values_of(const array& a) {
  Tensor t{a.shape(), {}};
  auto re = to_doubles(is_complex(a.dtype()) ? real(a) : a);
  auto im = is_complex(a.dtype()) ? to_doubles(imag(a))
                                  : std::vector<double>(re.size(), 0.0);
  for (size_t i = 0; i < re.size(); ++i) t.v.emplace_back(re[i], im[i]);
  return t;
}

// Cut or pad with zeros to n along axis.
Tensor fit(const Tensor& t, int axis, int n) {
  Tensor r{t.shape, {}};
  r.shape[axis] = n;
  int64_t in = t.inner(axis), out = t.outer(axis), have = t.shape[axis];
  r.v.assign(out * n * in, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t j = 0; j < std::min<int64_t>(n, have); ++j) {
      for (int64_t i = 0; i < in; ++i) {
        r.v[(o * n + j) * in + i] = t.v[(o * have + j) * in + i];
      }
    }
  }
  return r;
}

Tensor dft(const Tensor& t, int axis, bool inverse) {
  Tensor r = t;
  int64_t n = t.shape[axis], in = t.inner(axis), out = t.outer(axis);
  double sign = inverse ? 1 : -1;
  // exp(sign 2 pi i m / n) for m = (j * k) mod n: exact angles for long
  // lines, and one table per line length.
  std::vector<cd> w(n);
  for (int64_t m = 0; m < n; ++m) {
    double ang = sign * 2 * std::numbers::pi * m / n;
    w[m] = cd(std::cos(ang), std::sin(ang));
  }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      for (int64_t k = 0; k < n; ++k) {
        cd s = 0;
        for (int64_t j = 0, m = 0; j < n; ++j, m = (m + k) % n) {
          s += t.v[(o * n + j) * in + i] * w[m];
        }
        r.v[(o * n + k) * in + i] = s;
      }
    }
  }
  return r;
}

// Frequencies 0 .. n / 2 along axis extended to the Hermitian n points.
Tensor hermitian(const Tensor& t, int axis, int n) {
  Tensor r = fit(t, axis, n);
  int64_t in = t.inner(axis), out = t.outer(axis);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      for (int64_t k = n / 2 + 1; k < n; ++k) {
        r.v[(o * n + k) * in + i] = std::conj(r.v[(o * n + (n - k)) * in + i]);
      }
      // Only the real parts of 0 and n / 2 take part.
      r.v[o * n * in + i] = r.v[o * n * in + i].real();
      if (n % 2 == 0) {
        auto& h = r.v[(o * n + n / 2) * in + i];
        h = h.real();
      }
    }
  }
  return r;
}

double norm_scale(FFTNorm norm, bool inverse, double points) {
  if (norm == FFTNorm::ortho) return 1 / std::sqrt(points);
  if (norm == FFTNorm::backward) return inverse ? 1 / points : 1;
  return inverse ? 1 : 1 / points;
}

enum Kind { complex_forward, complex_inverse, real_forward, real_inverse };

// The reference transform of a over axes (normalized, non-negative) with
// sizes s (irfft: output sizes).
Tensor reference(const array& a, Kind kind, const std::vector<int>& axes,
                 const Shape& s, FFTNorm norm) {
  Tensor t = values_of(a);
  bool inverse = kind == complex_inverse || kind == real_inverse;
  if (kind == real_forward) {
    for (auto& x : t.v) x = x.real();
  }
  double points = 1;
  for (int v : s) points *= v;
  for (size_t i = 0; i < axes.size(); ++i) {
    bool last = i + 1 == axes.size();
    t = fit(t, axes[i], kind == real_inverse && last ? s[i] / 2 + 1 : s[i]);
  }
  for (size_t i = 0; i + 1 < axes.size(); ++i) t = dft(t, axes[i], inverse);
  int last = axes.back();
  if (kind == real_inverse) t = hermitian(t, last, s.back());
  t = dft(t, last, inverse);
  if (kind == real_forward) t = fit(t, last, s.back() / 2 + 1);
  double sc = norm_scale(norm, inverse, points);
  for (auto& x : t.v) x = (kind == real_inverse ? cd(x.real(), 0) : x) * sc;
  return t;
}

::testing::AssertionResult matches(const array& got, const Tensor& want,
                                   double rtol = 2e-6) {
  if (got.shape() != want.shape) {
    return ::testing::AssertionFailure()
           << "shape " << detail::shape_str(got.shape()) << ", want "
           << detail::shape_str(want.shape);
  }
  Tensor g = values_of(got);
  double scale = 1e-30, worst = 0;
  size_t at = 0;
  for (auto& w : want.v) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < g.v.size(); ++i) {
    double e = std::abs(g.v[i] - want.v[i]);
    if (e > worst) worst = e, at = i;
  }
  // float32 transforms: about log2(n) roundings of values as large as the
  // largest output.
  double bound = rtol * scale * std::max(1.0, std::log2(double(g.v.size())));
  if (worst > bound) {
    return ::testing::AssertionFailure()
           << "element " << at << ": got " << g.v[at] << ", want "
           << want.v[at] << " (error " << worst << " > " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

array complex_input(const Shape& shape) {
  return add(astype(random_array(shape, float32, -1, 1), complex64),
             multiply(astype(random_array(shape, float32, -1, 1), complex64),
                      array(complex64_t(0, 1))));
}

Shape sizes_at(const array& a, const std::vector<int>& axes) {
  Shape s;
  for (int ax : axes) s.push_back(a.shape(ax));
  return s;
}

TEST(FFT, ComplexTransformsOfEveryAxisSetAndLayout) {
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{7}, {0}},          {{4, 6}, {1}},       {{4, 6}, {0}},
      {{4, 6}, {0, 1}},    {{4, 6}, {1, 0}},    {{3, 5, 8}, {0, 2}},
      {{3, 5, 8}, {0, 1, 2}}, {{2, 3, 4, 5}, {1, 3}}};
  for (auto& [shape, axes] : cases) {
    array z = complex_input(shape);
    std::vector<std::pair<std::string, array>> inputs = {
        {"row-major", z},
        {"transposed", as_transposed(z)},
        {"sliced", slice(complex_input([&] {
                           Shape s = shape;
                           for (auto& d : s) d *= 2;
                           return s;
                         }()),
                         Shape(shape.size(), 0),
                         [&] {
                           Shape s = shape;
                           for (auto& d : s) d *= 2;
                           return s;
                         }(),
                         Shape(shape.size(), 2))},
        {"broadcast", broadcast_to(slice(z, Shape(shape.size(), 0), [&] {
                                     Shape s = shape;
                                     s[0] = 1;
                                     return s;
                                   }()),
                                   shape)}};
    for (auto& [layout, x] : inputs) {
      std::string what = detail::shape_str(shape) + " " + layout;
      auto s = sizes_at(x, axes);
      EXPECT_TRUE(matches(fft::fftn(x, std::nullopt, axes),
                          reference(x, complex_forward, axes, s,
                                    FFTNorm::backward)))
          << "fftn " << what;
      EXPECT_TRUE(matches(fft::ifftn(x, std::nullopt, axes),
                          reference(x, complex_inverse, axes, s,
                                    FFTNorm::backward)))
          << "ifftn " << what;
    }
  }
}

TEST(FFT, EveryInputDtypeFamily) {
  // Real and integer inputs are cast to complex64 (rfft: float32; a complex
  // input's real part).
  for (Dtype dt : {float32, float64, float16, bfloat16, int32, uint8, bool_,
                   complex64}) {
    array x = dt == complex64 ? complex_input({5, 9})
                              : random_array({5, 9}, dt, -3, 3);
    std::vector<int> ax = {1};
    Shape s = {9};
    auto y = fft::fft(x);
    EXPECT_EQ(y.dtype(), complex64);
    EXPECT_TRUE(matches(y, reference(x, complex_forward, ax, s,
                                     FFTNorm::backward)))
        << dtype_name(dt);
    auto r = fft::rfft(x);
    EXPECT_EQ(r.dtype(), complex64);
    EXPECT_TRUE(matches(r, reference(x, real_forward, ax, s,
                                     FFTNorm::backward)))
        << dtype_name(dt);
    auto back = fft::irfft(x);
    EXPECT_EQ(back.dtype(), float32);
    EXPECT_TRUE(matches(back, reference(x, real_inverse, ax, {16},
                                        FFTNorm::backward)))
        << dtype_name(dt);
  }
}

TEST(FFT, SizesCutAndPad) {
  array z = complex_input({6, 10});
  for (int n : {1, 3, 10, 13, 32}) {
    EXPECT_TRUE(matches(fft::fft(z, n),
                        reference(z, complex_forward, {1}, {n},
                                  FFTNorm::backward)))
        << n;
    EXPECT_TRUE(matches(fft::ifft(z, n, 0),
                        reference(z, complex_inverse, {0}, {n},
                                  FFTNorm::backward)))
        << n;
  }
  Shape s = {4, 15};
  EXPECT_TRUE(matches(fft::fftn(z, s, std::vector<int>{0, 1}),
                      reference(z, complex_forward, {0, 1}, s,
                                FFTNorm::backward)));
  EXPECT_TRUE(matches(fft::fft2(z, Shape{9, 3}),
                      reference(z, complex_forward, {0, 1}, {9, 3},
                                FFTNorm::backward)));
}

TEST(FFT, RealTransformsOfOddAndEvenLengths) {
  for (int n : {1, 2, 5, 8, 9, 12, 31}) {
    array x = random_array({3, n}, float32, -1, 1);
    auto r = fft::rfft(x);
    EXPECT_EQ(r.shape(1), n / 2 + 1);
    EXPECT_TRUE(matches(r, reference(x, real_forward, {1}, {n},
                                     FFTNorm::backward)))
        << n;
    // The round trip needs n for odd lengths.
    EXPECT_TRUE(matches(fft::irfft(r, n), values_of(x))) << n;
    array z = complex_input({3, n / 2 + 1});
    EXPECT_TRUE(matches(fft::irfft(z, n),
                        reference(z, real_inverse, {1}, {n},
                                  FFTNorm::backward)))
        << n;
  }
  // n-d, with the real axis first in memory, and sizes.
  array x = random_array({4, 6, 5}, float32, -1, 1);
  std::vector<int> axes = {2, 0};
  EXPECT_TRUE(matches(fft::rfftn(x, std::nullopt, axes),
                      reference(x, real_forward, axes, {5, 4},
                                FFTNorm::backward)));
  array z = complex_input({4, 6, 3});
  EXPECT_TRUE(matches(fft::irfftn(z, std::nullopt, std::vector<int>{1, 2}),
                      reference(z, real_inverse, {1, 2}, {6, 4},
                                FFTNorm::backward)));
  EXPECT_TRUE(matches(fft::irfft2(z, Shape{5, 7}),
                      reference(z, real_inverse, {1, 2}, {5, 7},
                                FFTNorm::backward)));
  EXPECT_TRUE(matches(fft::rfft2(as_transposed(x)),
                      reference(as_transposed(x), real_forward, {1, 2},
                                {6, 5}, FFTNorm::backward)));
}

TEST(FFT, Norms) {
  array z = complex_input({3, 8});
  array x = random_array({3, 8}, float32, -1, 1);
  for (FFTNorm norm : {FFTNorm::backward, FFTNorm::ortho, FFTNorm::forward}) {
    EXPECT_TRUE(matches(fft::fft(z, std::nullopt, -1, norm),
                        reference(z, complex_forward, {1}, {8}, norm)));
    EXPECT_TRUE(matches(fft::ifft(z, std::nullopt, -1, norm),
                        reference(z, complex_inverse, {1}, {8}, norm)));
    EXPECT_TRUE(matches(fft::rfftn(x, std::nullopt, std::nullopt, norm),
                        reference(x, real_forward, {0, 1}, {3, 8}, norm)));
    EXPECT_TRUE(matches(fft::irfft(z, 11, -1, norm),
                        reference(z, real_inverse, {1}, {11}, norm)));
  }
}

TEST(FFT, LengthsOfEveryFactorization) {
  // Powers of two, mixed radices, large primes (past the small-radix
  // kernels) and prime multiples.
  for (int n : {3,  4,   6,    7,    11,   16,   17,   30,   49,  64,
                97, 121, 210,  243,  256,  625,  1000, 1009, 1024, 2310,
                4096, 4099, 6561, 8191}) {
    array z = complex_input({n});
    EXPECT_TRUE(matches(fft::fft(z), reference(z, complex_forward, {0}, {n},
                                               FFTNorm::backward)))
        << n;
    EXPECT_TRUE(matches(fft::ifft(z), reference(z, complex_inverse, {0}, {n},
                                                FFTNorm::backward)))
        << n;
  }
}

TEST(FFT, ManyLinesAcrossThreads) {
  // Enough lines for several chunks; columns not a multiple of the column
  // block.
  array z = complex_input({300, 50});
  EXPECT_TRUE(matches(fft::fft(z, std::nullopt, 0),
                      reference(z, complex_forward, {0}, {300},
                                FFTNorm::backward)));
  EXPECT_TRUE(matches(fft::fft(z), reference(z, complex_forward, {1}, {50},
                                             FFTNorm::backward)));
  array x = random_array({64, 40, 6}, float32, -1, 1);
  EXPECT_TRUE(matches(fft::rfftn(x, std::nullopt, std::vector<int>{0, 1}),
                      reference(x, real_forward, {0, 1}, {64, 40},
                                FFTNorm::backward)));
}

TEST(FFT, ManyAxesAndLargeArrays) {
  // Four axes (past what the GPU's library takes in one call), three real
  // axes, and a large round trip.
  array z = complex_input({2, 3, 4, 5});
  std::vector<int> all = {0, 1, 2, 3};
  EXPECT_TRUE(matches(fft::fftn(z), reference(z, complex_forward, all,
                                             {2, 3, 4, 5},
                                             FFTNorm::backward)));
  std::vector<int> three = {0, 1, 3};
  EXPECT_TRUE(matches(fft::irfftn(z, std::nullopt, three),
                      reference(z, real_inverse, three, {2, 3, 8},
                                FFTNorm::backward)));
  // An axis with values after it, with few and with many blocks of values
  // before it (on the GPU: transforms where they lie, or a packed copy).
  for (int blocks : {3, 20}) {
    array c = complex_input({blocks, 6, 5});
    EXPECT_TRUE(matches(fft::fft(c, std::nullopt, 1),
                        reference(c, complex_forward, {1}, {6},
                                  FFTNorm::backward)))
        << blocks;
    EXPECT_TRUE(matches(fft::irfft(c, 10, 1),
                        reference(c, real_inverse, {1}, {10},
                                  FFTNorm::backward)))
        << blocks;
    EXPECT_TRUE(matches(fft::irfft(c, 11, 1, FFTNorm::ortho),
                        reference(c, real_inverse, {1}, {11}, FFTNorm::ortho)))
        << blocks;
    array r = random_array({blocks, 8, 5}, float32, -1, 1);
    EXPECT_TRUE(matches(fft::rfft(r, std::nullopt, 1),
                        reference(r, real_forward, {1}, {8},
                                  FFTNorm::backward)))
        << blocks;
    EXPECT_TRUE(matches(fft::fftn(c, std::nullopt, std::vector<int>{0, 1}),
                        reference(c, complex_forward, {0, 1}, {blocks, 6},
                                  FFTNorm::backward)))
        << blocks;
  }
  array x = random_array({384, 1000}, float32, -1, 1);
  EXPECT_TRUE(matches(fft::irfft2(fft::rfft2(x), Shape{384, 1000}),
                      values_of(x)));
  EXPECT_TRUE(matches(fft::ifft(fft::fft(x, std::nullopt, 0), std::nullopt, 0),
                      values_of(astype(x, complex64))));
}

TEST(FFT, RealTransformsOverSeveralAxesWithFewAndManyBlocks) {
  // On the GPU, few blocks of the other axes (3) run the complex axes in
  // place apart from the real one; many (20) take one multi-axis plan.
  for (int blocks : {3, 20}) {
    array x = random_array({blocks, 4, 6, 8}, float32, -1, 1);
    std::vector<int> axes = {1, 2, 3};
    EXPECT_TRUE(matches(fft::rfftn(x, std::nullopt, axes),
                        reference(x, real_forward, axes, {4, 6, 8},
                                  FFTNorm::backward)))
        << blocks;
    std::vector<int> two = {2, 1};
    EXPECT_TRUE(matches(fft::rfftn(x, std::nullopt, two, FFTNorm::ortho),
                        reference(x, real_forward, two, {6, 4},
                                  FFTNorm::ortho)))
        << blocks;
    array z = complex_input({blocks, 4, 6, 5});
    EXPECT_TRUE(matches(fft::irfftn(z, std::nullopt, axes),
                        reference(z, real_inverse, axes, {4, 6, 8},
                                  FFTNorm::backward)))
        << blocks;
    std::vector<int> outer = {0, 3};
    EXPECT_TRUE(matches(fft::irfftn(z, std::nullopt, outer, FFTNorm::forward),
                        reference(z, real_inverse, outer, {blocks, 8},
                                  FFTNorm::forward)))
        << blocks;
  }
}

TEST(FFT, InputsAreLeftAsTheyWere) {
  // Transforms may read a row-major input in place and write over their own
  // copies only.
  array z = complex_input({6, 16});
  array x = random_array({6, 16}, float32, -1, 1);
  eval({z, x});
  Tensor zv = values_of(z), xv = values_of(x);
  eval({fft::fft(z), fft::ifft2(z), fft::irfft(z), fft::irfft2(z),
        fft::rfft(x), fft::rfft2(x)});
  EXPECT_TRUE(matches(z, zv, 0));
  EXPECT_TRUE(matches(x, xv, 0));
}

TEST(FFT, EmptyAndSingleElementArrays) {
  array e = zeros({0, 4}, complex64);
  auto y = fft::fft(e);
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  EXPECT_EQ(fft::rfft(zeros({0, 6}, float32)).shape(), (Shape{0, 4}));
  array one = complex_input({3, 1});
  EXPECT_TRUE(matches(fft::fft(one), values_of(one)));
  EXPECT_TRUE(matches(fft::ifft(one), values_of(one)));
}

TEST(FFT, FrequenciesAndShifts) {
  for (int n : {1, 4, 5}) {
    for (double d : {1.0, 0.25}) {
      auto f = to_doubles(fft::fftfreq(n, d));
      auto r = to_doubles(fft::rfftfreq(n, d));
      ASSERT_EQ(f.size(), size_t(n));
      ASSERT_EQ(r.size(), size_t(n / 2 + 1));
      for (int k = 0; k < n; ++k) {
        int signed_k = k < (n + 1) / 2 ? k : k - n;
        EXPECT_NEAR(f[k], signed_k / (d * n), 1e-6) << n << " " << k;
      }
      for (int k = 0; k <= n / 2; ++k) EXPECT_NEAR(r[k], k / (d * n), 1e-6);
    }
  }
  array a = reshape(arange(0, 15, 1), {3, 5});
  // fftshift rolls by n / 2 along each axis; ifftshift undoes it.
  auto sh = to_doubles(fft::fftshift(a));
  auto v = to_doubles(a);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(sh[((i + 1) % 3) * 5 + (j + 2) % 5], v[i * 5 + j]);
    }
  }
  EXPECT_EQ(to_doubles(fft::ifftshift(fft::fftshift(a))), v);
  auto cols = to_doubles(fft::fftshift(a, std::vector<int>{-1}));
  EXPECT_EQ(cols[2], v[0]);
  EXPECT_EQ(cols[5 + 2], v[5]);
}

TEST(FFT, BadInputNamesTheOpAndTheShape) {
  array x = random_array({4, 6}, float32);
  expect_invalid([&] { fft::fft(array(1.0f)); }, "fft", "scalar");
  expect_invalid([&] { fft::fft(x, std::nullopt, 2); }, "fft", "(4, 6)");
  expect_invalid([&] { fft::fft(x, 0); }, "fft", "size 0");
  expect_invalid(
      [&] { fft::fftn(x, std::nullopt, std::vector<int>{0, -2}); }, "fftn",
      "duplicated axis");
  expect_invalid([&] { fft::fftn(x, Shape{3}, std::vector<int>{0, 1}); },
                 "fftn", "different sizes");
  expect_invalid([&] { fft::fftn(x, Shape{3, 3}); }, "fftn", "`axes`");
  expect_invalid([&] { fft::irfft(random_array({4, 1}, float32)); }, "irfft",
                 "needs n");
  expect_invalid([&] { fft::norm_from_string("ortogonal", "rfft"); }, "rfft",
                 "'ortogonal'");
}

TEST(FFT, InsideCompileAndOnOtherStreams) {
  array z = complex_input({5, 12});
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{fft::irfft(fft::fft(in[0], std::nullopt, 0), 12)};
  };
  auto eager = f({z})[0];
  auto compiled = compile(f)({z})[0];
  EXPECT_TRUE(matches(compiled, values_of(eager)));
}

} // namespace
} // namespace kiln::test
