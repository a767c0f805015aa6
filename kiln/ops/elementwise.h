// Elementwise ops: unary math, binary arithmetic and comparisons, where and
// clip. Binary ops promote dtypes (MLX's table) and broadcast shapes.
#pragma once

#include <optional>
#include <type_traits>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

array abs(const array& a, StreamOrDevice s = {});
array negative(const array& a, StreamOrDevice s = {});
array sign(const array& a, StreamOrDevice s = {});
array square(const array& a, StreamOrDevice s = {});
array exp(const array& a, StreamOrDevice s = {});
array expm1(const array& a, StreamOrDevice s = {});
array log(const array& a, StreamOrDevice s = {});
array log1p(const array& a, StreamOrDevice s = {});
array log2(const array& a, StreamOrDevice s = {});
array log10(const array& a, StreamOrDevice s = {});
array sin(const array& a, StreamOrDevice s = {});
array cos(const array& a, StreamOrDevice s = {});
array tan(const array& a, StreamOrDevice s = {});
array arcsin(const array& a, StreamOrDevice s = {});
array arccos(const array& a, StreamOrDevice s = {});
array arctan(const array& a, StreamOrDevice s = {});
array sinh(const array& a, StreamOrDevice s = {});
array cosh(const array& a, StreamOrDevice s = {});
array tanh(const array& a, StreamOrDevice s = {});
array arcsinh(const array& a, StreamOrDevice s = {});
array arccosh(const array& a, StreamOrDevice s = {});
array arctanh(const array& a, StreamOrDevice s = {});
array sqrt(const array& a, StreamOrDevice s = {});
array rsqrt(const array& a, StreamOrDevice s = {});
array reciprocal(const array& a, StreamOrDevice s = {});
array sigmoid(const array& a, StreamOrDevice s = {});
array erf(const array& a, StreamOrDevice s = {});
array erfinv(const array& a, StreamOrDevice s = {});
array floor(const array& a, StreamOrDevice s = {});
array ceil(const array& a, StreamOrDevice s = {});
/** Round half to even, to `decimals` places (MLX's two overloads). */
array round(const array& a, int decimals, StreamOrDevice s = {});
inline array round(const array& a, StreamOrDevice s = {}) {
  return round(a, 0, s);
}
array logical_not(const array& a, StreamOrDevice s = {});
array bitwise_invert(const array& a, StreamOrDevice s = {});
array isnan(const array& a, StreamOrDevice s = {});
array isinf(const array& a, StreamOrDevice s = {});
array isposinf(const array& a, StreamOrDevice s = {});
array isneginf(const array& a, StreamOrDevice s = {});
array isfinite(const array& a, StreamOrDevice s = {});
array stop_gradient(const array& a, StreamOrDevice s = {});
/** Round towards zero; integers are returned unchanged. */
array trunc(const array& a, StreamOrDevice s = {});
/** Radians to degrees and back (integers become float32). */
array degrees(const array& a, StreamOrDevice s = {});
array radians(const array& a, StreamOrDevice s = {});
/** NaN becomes nan, +inf posinf and -inf neginf (by default the largest
 *  finite value of a's dtype and its negative). Integer and bool arrays are
 *  returned unchanged; complex64 is not supported (as MLX). */
array nan_to_num(const array& a, float nan = 0.0f,
                 std::optional<float> posinf = std::nullopt,
                 std::optional<float> neginf = std::nullopt,
                 StreamOrDevice s = {});
/** Complex helpers: the real and imaginary parts (float32 for complex64; for
 *  a real array, a itself and zeros), and the complex conjugate (a itself
 *  for a real array). */
array real(const array& a, StreamOrDevice s = {});
array imag(const array& a, StreamOrDevice s = {});
array conjugate(const array& a, StreamOrDevice s = {});
array conj(const array& a, StreamOrDevice s = {});

/** Convert to another dtype. */
array astype(array a, Dtype dtype, StreamOrDevice s = {});

array add(const array& a, const array& b, StreamOrDevice s = {});
array subtract(const array& a, const array& b, StreamOrDevice s = {});
array multiply(const array& a, const array& b, StreamOrDevice s = {});
array divide(const array& a, const array& b, StreamOrDevice s = {});
array floor_divide(const array& a, const array& b, StreamOrDevice s = {});
array remainder(const array& a, const array& b, StreamOrDevice s = {});
array power(const array& a, const array& b, StreamOrDevice s = {});
array maximum(const array& a, const array& b, StreamOrDevice s = {});
array minimum(const array& a, const array& b, StreamOrDevice s = {});
array arctan2(const array& a, const array& b, StreamOrDevice s = {});
array logaddexp(const array& a, const array& b, StreamOrDevice s = {});
array equal(const array& a, const array& b, StreamOrDevice s = {});
array not_equal(const array& a, const array& b, StreamOrDevice s = {});
array less(const array& a, const array& b, StreamOrDevice s = {});
array less_equal(const array& a, const array& b, StreamOrDevice s = {});
array greater(const array& a, const array& b, StreamOrDevice s = {});
array greater_equal(const array& a, const array& b, StreamOrDevice s = {});
array logical_and(const array& a, const array& b, StreamOrDevice s = {});
array logical_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_and(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_xor(const array& a, const array& b, StreamOrDevice s = {});
array left_shift(const array& a, const array& b, StreamOrDevice s = {});
array right_shift(const array& a, const array& b, StreamOrDevice s = {});

/** |a - b| <= atol + rtol * |b|, elementwise. */
array isclose(const array& a, const array& b, double rtol = 1e-5,
              double atol = 1e-8, bool equal_nan = false,
              StreamOrDevice s = {});
/** A bool scalar: all(isclose(a, b)). */
array allclose(const array& a, const array& b, double rtol = 1e-5,
               double atol = 1e-8, bool equal_nan = false,
               StreamOrDevice s = {});
/** A bool scalar: same shape and equal values (dtypes may differ). */
array array_equal(const array& a, const array& b, bool equal_nan = false,
                  StreamOrDevice s = {});

array where(const array& condition, const array& x, const array& y,
            StreamOrDevice s = {});
/** Clip to [a_min, a_max]; either bound may be absent. */
array clip(const array& a, const std::optional<array>& a_min,
           const std::optional<array>& a_max, StreamOrDevice s = {});

// Operators, as MLX defines them for C++.
array operator-(const array& a);
array operator!(const array& a);
array operator~(const array& a);
array operator+(const array& a, const array& b);
array operator-(const array& a, const array& b);
array operator*(const array& a, const array& b);
array operator/(const array& a, const array& b);
array operator%(const array& a, const array& b);
array operator==(const array& a, const array& b);
array operator!=(const array& a, const array& b);
array operator<(const array& a, const array& b);
array operator<=(const array& a, const array& b);
array operator>(const array& a, const array& b);
array operator>=(const array& a, const array& b);
array operator&&(const array& a, const array& b);
array operator||(const array& a, const array& b);
array operator&(const array& a, const array& b);
array operator|(const array& a, const array& b);
array operator^(const array& a, const array& b);
array operator<<(const array& a, const array& b);
array operator>>(const array& a, const array& b);

namespace detail {
/** A C++ scalar next to an array is weakly typed, like a Python scalar: it
 *  takes the array's dtype, unless it is a float beside an integer array. */
template <typename T>
array weak_scalar(T v, Dtype like) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!is_inexact(like)) return array(v, float32);
  }
  return array(v, like);
}
} // namespace detail

#define KILN_SCALAR_OPERATOR(op)                                          \
  template <typename T,                                                   \
            typename = std::enable_if_t<std::is_arithmetic_v<T>>>         \
  array operator op(const array& a, T b) {                                \
    return a op detail::weak_scalar(b, a.dtype());                        \
  }                                                                       \
  template <typename T,                                                   \
            typename = std::enable_if_t<std::is_arithmetic_v<T>>>         \
  array operator op(T a, const array& b) {                                \
    return detail::weak_scalar(a, b.dtype()) op b;                        \
  }
KILN_SCALAR_OPERATOR(+)
KILN_SCALAR_OPERATOR(-)
KILN_SCALAR_OPERATOR(*)
KILN_SCALAR_OPERATOR(/)
KILN_SCALAR_OPERATOR(==)
KILN_SCALAR_OPERATOR(!=)
KILN_SCALAR_OPERATOR(<)
KILN_SCALAR_OPERATOR(<=)
KILN_SCALAR_OPERATOR(>)
KILN_SCALAR_OPERATOR(>=)
#undef KILN_SCALAR_OPERATOR

} // namespace kiln
