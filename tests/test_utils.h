// Helpers shared by the tests: random inputs, float64 references, and the
// layouts every op must accept (transposed, sliced, broadcast).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::test {

/** Deterministic generator per test. */
std::mt19937_64& rng();

/** Makes d the default device for a scope (tests whose subject is the host
 *  allocator, which the GPU's memory does not go through). */
struct DefaultDeviceScope {
  explicit DefaultDeviceScope(Device d) : previous(default_device()) {
    set_default_device(d);
  }
  ~DefaultDeviceScope() { set_default_device(previous); }
  Device previous;
};

/** Random values of dtype in [lo, hi) (integers: whole numbers in range,
 *  never all zero). Built on the host, returned evaluated. */
/** Host bytes allocated past `before` at the peak since reset_peak_memory()
 *  (which sets the peak to 0, as MLX's does: with no allocation since, the
 *  peak is below the memory still in use). */
inline size_t peak_above(size_t before) {
  size_t peak = get_peak_memory();
  return peak > before ? peak - before : 0;
}

array random_array(const Shape& shape, Dtype dtype, double lo = -2.0,
                   double hi = 2.0);

/** re + i im as complex64, each part exactly (on stream or device s); re
 *  and im of one shape. */
array complex_of(const array& re, const array& im, StreamOrDevice s = {});
/** complex64 values with both parts random in [lo, hi), evaluated. */
array complex_random(const Shape& shape, double lo = -1.0, double hi = 1.0);

/** Elements of a (any layout, any dtype) as doubles, in row-major order.
 *  Complex values give their real part. */
std::vector<double> to_doubles(array a);

/** MLX's order of complex values (std::complex<float> or <double>): by real
 *  part, then imaginary part. */
template <typename C>
bool complex_before(C x, C y) {
  return x.real() < y.real() || (x.real() == y.real() && x.imag() < y.imag());
}

/** The same values as a, in another layout:
 *  "transposed": a row-major buffer of the reversed shape, transposed back;
 *  "broadcast":  a's first row broadcast when possible (values change!). */
array as_transposed(const array& a);

/** Relative+absolute comparison, reporting the first mismatch. */
::testing::AssertionResult all_close(const std::vector<double>& got,
                                     const std::vector<double>& want,
                                     double rtol, double atol);

/** Tolerance for results computed in dtype d. */
double tolerance(Dtype d);

/** Float dtypes, integer dtypes, every dtype. */
const std::vector<Dtype>& float_dtypes();
const std::vector<Dtype>& int_dtypes();
const std::vector<Dtype>& all_dtypes();

/** Map f over a row-major vector of doubles. */
std::vector<double> map1(const std::vector<double>& x,
                         const std::function<double(double)>& f);
std::vector<double> map2(const std::vector<double>& x,
                         const std::vector<double>& y,
                         const std::function<double(double, double)>& f);

/** f() throws std::invalid_argument whose message names "[op]" and holds
 *  `part` (a shape, a dtype, the rule broken). */
template <typename F>
void expect_invalid(F&& f, const std::string& op, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected [" << op << "] ... " << part;
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("[" + op + "]"), std::string::npos) << what;
    EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

/** Round each value to what dtype d can hold (the reference sees the same
 *  inputs the kernel saw). */
std::vector<double> quantize(const std::vector<double>& x, Dtype d);

} // namespace kiln::test
