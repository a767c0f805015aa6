#include "test_utils.h"

#include <cmath>
#include <sstream>

namespace kiln::test {

std::mt19937_64& rng() {
  static std::mt19937_64 g(1234);
  return g;
}

array random_array(const Shape& shape, Dtype dtype, double lo, double hi) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(n);
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& x : v) {
    x = u(rng());
    if (dtype == bool_) x = x > (lo + hi) / 2;
    else if (!is_inexact(dtype)) {
      x = std::floor(x);
      if (is_unsigned(dtype)) x = std::abs(x);
    }
  }
  if (!v.empty() && !is_inexact(dtype) && dtype != bool_) v[0] = 1;
  array a(v.begin(), shape, dtype);
  a.eval();
  return a;
}

array complex_of(const array& re, const array& im, StreamOrDevice s) {
  // The parts side by side, read as complex64: exact, where re + i * im
  // would spread a NaN part to the other.
  array parts = stack({astype(re, float32, s), astype(im, float32, s)}, -1, s);
  return reshape(view(parts, complex64, s), re.shape(), s);
}

array complex_random(const Shape& shape, double lo, double hi) {
  array z = complex_of(random_array(shape, float32, lo, hi),
                       random_array(shape, float32, lo, hi));
  z.eval();
  return z;
}

std::vector<double> to_doubles(array a) {
  a.eval();
  std::vector<double> out;
  out.reserve(a.size());
  if (a.size() == 0) return out;
  dispatch_type(a.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    const T* p = a.data<T>();
    std::vector<int> idx(a.ndim(), 0);
    for (size_t i = 0; i < a.size(); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < a.ndim(); ++d) off += idx[d] * a.strides()[d];
      out.push_back(cast_to<double>(p[off]));
      for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
        if (++idx[d] < a.shape(d)) break;
        idx[d] = 0;
      }
    }
  });
  return out;
}

array as_transposed(const array& a) {
  // Materialize a.T row-major, then transpose it back: same values, strides
  // reversed.
  auto t = contiguous(transpose(a));
  t.eval();
  auto out = transpose(t);
  out.eval();
  return out;
}

::testing::AssertionResult all_close(const std::vector<double>& got,
                                     const std::vector<double>& want,
                                     double rtol, double atol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::abs(g - w) <= atol + rtol * std::abs(w))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", want " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

double tolerance(Dtype d) {
  if (d == float16) return 2e-3;
  if (d == bfloat16) return 1.6e-2;
  if (d == float32 || d == complex64) return 2e-6;
  if (d == float64) return 1e-12;
  return 0;
}

const std::vector<Dtype>& float_dtypes() {
  static std::vector<Dtype> v = {float16, bfloat16, float32, float64};
  return v;
}

const std::vector<Dtype>& int_dtypes() {
  static std::vector<Dtype> v = {int8,  int16,  int32,  int64,
                                 uint8, uint16, uint32, uint64};
  return v;
}

const std::vector<Dtype>& all_dtypes() {
  static std::vector<Dtype> v = {bool_,  int8,    int16,   int32,   int64,
                                 uint8,  uint16,  uint32,  uint64,  float16,
                                 bfloat16, float32, float64};
  return v;
}

std::vector<double> map1(const std::vector<double>& x,
                         const std::function<double(double)>& f) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f(x[i]);
  return out;
}

std::vector<double> map2(const std::vector<double>& x,
                         const std::vector<double>& y,
                         const std::function<double(double, double)>& f) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f(x[i], y[i]);
  return out;
}

std::vector<double> quantize(const std::vector<double>& x, Dtype d) {
  return to_doubles(array(x.begin(), {static_cast<int>(x.size())}, d));
}

} // namespace kiln::test
