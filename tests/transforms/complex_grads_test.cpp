// Gradients of real functions of complex arguments follow MLX's convention:
// grad L(z) = dL/dx + i dL/dy. Checked against central differences along x
// and y for holomorphic ops (elementwise, matmul, products, scans) and a
// non-holomorphic one (abs), and the FFTs.
#include <cmath>

#include "kiln/ops/fft.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

using Args = std::vector<array>;

array complex_array(const Shape& shape, double lo, double hi) {
  return add(astype(random_array(shape, float32, lo, hi), complex64),
             multiply(astype(random_array(shape, float32, lo, hi), complex64),
                      array(complex64_t(0, 1))));
}

std::vector<std::complex<float>> to_complex(const array& z) {
  auto re = to_doubles(real(z)), im = to_doubles(imag(z));
  std::vector<std::complex<float>> out;
  for (size_t i = 0; i < re.size(); ++i) out.emplace_back(re[i], im[i]);
  return out;
}

// dL/dx + i dL/dy by central differences in float32 (complex64 is the only
// complex type), with a step large enough for float32's rounding.
std::vector<std::complex<double>> numeric_gradient(
    const std::function<array(const array&)>& loss, const array& z) {
  const double h = 1e-2;
  auto at = [&](const array& v) { return to_doubles(loss(v))[0]; };
  auto base = to_complex(z);
  bool complex_input = is_complex(z.dtype());
  std::vector<std::complex<double>> g(base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    for (int part = 0; part < (complex_input ? 2 : 1); ++part) {
      auto shifted = [&](double by) {
        auto v = base;
        v[i] += part == 0 ? std::complex<float>(by, 0)
                          : std::complex<float>(0, by);
        if (!complex_input) {
          std::vector<float> r;
          for (auto& c : v) r.push_back(c.real());
          return array(r, z.shape(), float32);
        }
        return array(v, z.shape(), complex64);
      };
      double d = (at(shifted(h)) - at(shifted(-h))) / (2 * h);
      g[i] += part == 0 ? std::complex<double>(d, 0)
                        : std::complex<double>(0, d);
    }
  }
  return g;
}

::testing::AssertionResult gradient_matches(
    const std::function<array(const array&)>& loss, const array& z) {
  auto got = to_complex(grad(loss)(z));
  auto want = numeric_gradient(loss, z);
  double scale = 1e-3;
  for (auto& w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i) {
    std::complex<double> g(got[i].real(), got[i].imag());
    if (std::abs(g - want[i]) > 3e-3 * scale) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ComplexGradients, HolomorphicOpsConjugateTheirDerivative) {
  array z = complex_array({5}, 0.3, 1.2);
  array w = complex_array({5}, 0.3, 1.2);
  std::vector<std::pair<const char*, std::function<array(const array&)>>>
      losses = {
          {"Im(z w)", [&](const array& a) { return sum(imag(multiply(a, w))); }},
          {"Re(z / w)", [&](const array& a) { return sum(real(divide(a, w))); }},
          {"Re(w / z)", [&](const array& a) { return sum(real(divide(w, a))); }},
          {"Im(exp z)", [&](const array& a) { return sum(imag(exp(a))); }},
          {"Re(sin z)", [&](const array& a) { return sum(real(sin(a))); }},
          {"Im(log z)", [&](const array& a) { return sum(imag(log(a))); }},
          {"Re(z^2)", [&](const array& a) { return sum(real(square(a))); }},
          {"Im(sqrt z)", [&](const array& a) { return sum(imag(sqrt(a))); }},
          {"|z|", [&](const array& a) { return sum(abs(a)); }},
          {"Re(conj(z) w)",
           [&](const array& a) { return sum(real(multiply(conjugate(a), w))); }},
          {"Im(prod z)", [&](const array& a) { return imag(prod(a)); }},
          {"Re(cumprod z . w)",
           [&](const array& a) {
             return sum(real(multiply(cumprod(a, 0), w)));
           }},
          {"Re(z @ w)",
           [&](const array& a) {
             return sum(real(matmul(reshape(a, {1, 5}), reshape(w, {5, 1}))));
           }},
          {"Im(w @ z)",
           [&](const array& a) {
             return sum(imag(matmul(reshape(w, {1, 5}), reshape(a, {5, 1}))));
           }},
      };
  for (auto& [name, loss] : losses) {
    EXPECT_TRUE(gradient_matches(loss, z)) << name;
  }
  // jvp of |z| (real output, complex input): Re(conj(z) t) / |z|.
  array t = complex_array({5}, -1, 1);
  auto [out, tan] = jvp([](const array& a) { return abs(a); }, z, t);
  auto zs = to_complex(z), ts = to_complex(t);
  auto got = to_doubles(tan);
  for (size_t i = 0; i < zs.size(); ++i) {
    double want = (std::conj(zs[i]) * ts[i]).real() / std::abs(zs[i]);
    EXPECT_NEAR(got[i], want, 1e-5) << i;
  }
}

// The transforms are linear: vjp is the adjoint (conjugate transpose) with
// the real transforms' halving and doubling of frequencies, jvp the
// transform itself, vmap the transform over shifted axes.
TEST(ComplexGradients, FourierTransforms) {
  array z = complex_array({3, 5}, -1, 1);
  array x = random_array({3, 8}, float32, -1, 1);
  array w = complex_array({3, 8}, -1, 1);
  array wr = random_array({3, 9}, float32, -1, 1);
  auto weighted = [](const array& y, const array& by) {
    // Re(sum(y * by)) over the overlap of their shapes.
    Shape stop = {std::min(y.shape(0), by.shape(0)),
                  std::min(y.shape(1), by.shape(1))};
    return sum(real(multiply(slice(y, {0, 0}, stop),
                             slice(by, {0, 0}, stop))));
  };
  std::vector<std::tuple<const char*, std::function<array(const array&)>,
                         array>>
      losses = {
          {"fft", [&](const array& a) { return weighted(fft::fft(a), w); }, z},
          {"ifft ortho",
           [&](const array& a) {
             return weighted(fft::ifft(a, std::nullopt, -1, FFTNorm::ortho),
                             w);
           },
           z},
          {"fft2 padded",
           [&](const array& a) {
             return weighted(fft::fft2(a, Shape{4, 8}), w);
           },
           z},
          {"fft of a real x",
           [&](const array& a) { return weighted(fft::fft(a), w); }, x},
          {"rfft", [&](const array& a) { return weighted(fft::rfft(a), w); },
           x},
          {"rfft forward norm, cut",
           [&](const array& a) {
             return weighted(fft::rfft(a, 6, -1, FFTNorm::forward), w);
           },
           x},
          {"rfftn", [&](const array& a) { return weighted(fft::rfftn(a), w); },
           x},
          {"|rfft|^2",
           [&](const array& a) { return sum(square(abs(fft::rfft(a)))); }, x},
          {"irfft even",
           [&](const array& a) {
             return sum(multiply(fft::irfft(a), slice(wr, {0, 0}, {3, 8})));
           },
           z},
          {"irfft odd",
           [&](const array& a) { return sum(multiply(fft::irfft(a, 9), wr)); },
           z},
          {"irfftn",
           [&](const array& a) {
             return sum(multiply(fft::irfftn(a), slice(wr, {0, 0}, {3, 8})));
           },
           z},
      };
  for (auto& [name, loss, at] : losses) {
    EXPECT_TRUE(gradient_matches(loss, at)) << name;
  }
  // jvp of a linear map is the map of the tangent.
  array t = complex_array({3, 5}, -1, 1);
  auto [out, tan] = jvp([](const array& a) { return fft::ifft2(a); }, z, t);
  EXPECT_TRUE(all_close(to_doubles(imag(tan)), to_doubles(imag(fft::ifft2(t))),
                        1e-6, 1e-6));
  // vmap over axis 1 of an fft along (unbatched) axis 0.
  auto mapped = vmap([](const array& a) { return fft::fft(a, std::nullopt, 0); },
                     1, 1)(z);
  EXPECT_TRUE(all_close(to_doubles(imag(mapped)),
                        to_doubles(imag(fft::fft(z, std::nullopt, 0))), 1e-6,
                        1e-6));
}

} // namespace
} // namespace kiln::test
