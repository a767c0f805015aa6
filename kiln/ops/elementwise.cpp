#include "kiln/ops/elementwise.h"

#include <limits>
#include <numbers>

#include "kiln/ops/creation.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/elementwise.h"

namespace kiln {

using detail::at_least_float;
using detail::describe;
using detail::invalid;

namespace {

template <typename P>
array unary(const array& a, Dtype out_dtype, StreamOrDevice s) {
  auto stream = to_stream(s);
  auto in = a.dtype() == out_dtype || std::is_same_v<P, LogicalNot>
                ? a
                : astype(a, out_dtype, stream);
  return array(a.shape(), out_dtype, std::make_shared<P>(stream), {in});
}

// Unary math that works in floating point: integers become float32.
template <typename P>
array unary_float(const array& a, StreamOrDevice s) {
  return unary<P>(a, at_least_float(a.dtype()), s);
}

// Promote, broadcast and build the node; out_dtype defaults to the
// promoted dtype.
template <typename P>
array binary(const char* op, const array& a, const array& b,
             std::optional<Dtype> compute, std::optional<Dtype> out_dtype,
             StreamOrDevice s) {
  auto stream = to_stream(s);
  Dtype dt = compute.value_or(promote_types(a.dtype(), b.dtype()));
  auto shape = detail::broadcast_shapes(a.shape(), b.shape(), op);
  auto x = detail::broadcast_operand(astype(a, dt, stream), shape, stream);
  auto y = detail::broadcast_operand(astype(b, dt, stream), shape, stream);
  return array(std::move(shape), out_dtype.value_or(dt),
               std::make_shared<P>(stream), {x, y});
}

void require_integral(const char* op, const array& a, const array& b) {
  for (auto* x : {&a, &b}) {
    if (!is_integral(x->dtype()) && x->dtype() != bool_) {
      invalid(op, "needs integer or bool inputs; got " + describe(a) +
                      " and " + describe(b) + ".");
    }
  }
}

void reject_complex(const char* op, const array& a) {
  if (is_complex(a.dtype())) {
    invalid(op, "not supported for complex64 (" + describe(a) + ").");
  }
}

} // namespace

array astype(array a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  auto p = std::make_shared<AsType>(to_stream(s), dtype);
  Shape shape = a.shape(); // read before a is moved into the inputs
  return array(std::move(shape), dtype, std::move(p), {std::move(a)});
}

array abs(const array& a, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    // |z| is real, as in NumPy and MLX.
    return array(a.shape(), float32, std::make_shared<Abs>(to_stream(s)), {a});
  }
  return unary<Abs>(a, a.dtype(), s);
}

array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) {
    invalid("negative", "not supported for bool; use logical_not instead.");
  }
  return unary<Negative>(a, a.dtype(), s);
}

array sign(const array& a, StreamOrDevice s) {
  return unary<Sign>(a, a.dtype(), s);
}

array square(const array& a, StreamOrDevice s) {
  return unary<Square>(a, a.dtype(), s);
}

array exp(const array& a, StreamOrDevice s) { return unary_float<Exp>(a, s); }
array expm1(const array& a, StreamOrDevice s) {
  reject_complex("expm1", a);
  return unary_float<Expm1>(a, s);
}
array log(const array& a, StreamOrDevice s) { return unary_float<Log>(a, s); }
array log1p(const array& a, StreamOrDevice s) {
  return unary_float<Log1p>(a, s);
}
array log2(const array& a, StreamOrDevice s) {
  return unary_float<Log2>(a, s);
}
array log10(const array& a, StreamOrDevice s) {
  return unary_float<Log10>(a, s);
}
array sin(const array& a, StreamOrDevice s) { return unary_float<Sin>(a, s); }
array cos(const array& a, StreamOrDevice s) { return unary_float<Cos>(a, s); }
array tan(const array& a, StreamOrDevice s) { return unary_float<Tan>(a, s); }
array arcsin(const array& a, StreamOrDevice s) {
  return unary_float<ArcSin>(a, s);
}
array arccos(const array& a, StreamOrDevice s) {
  return unary_float<ArcCos>(a, s);
}
array arctan(const array& a, StreamOrDevice s) {
  return unary_float<ArcTan>(a, s);
}
array sinh(const array& a, StreamOrDevice s) { return unary_float<Sinh>(a, s); }
array cosh(const array& a, StreamOrDevice s) { return unary_float<Cosh>(a, s); }
array tanh(const array& a, StreamOrDevice s) { return unary_float<Tanh>(a, s); }
array arcsinh(const array& a, StreamOrDevice s) {
  return unary_float<ArcSinh>(a, s);
}
array arccosh(const array& a, StreamOrDevice s) {
  return unary_float<ArcCosh>(a, s);
}
array arctanh(const array& a, StreamOrDevice s) {
  return unary_float<ArcTanh>(a, s);
}
array sqrt(const array& a, StreamOrDevice s) { return unary_float<Sqrt>(a, s); }
array rsqrt(const array& a, StreamOrDevice s) {
  return unary_float<Rsqrt>(a, s);
}

array reciprocal(const array& a, StreamOrDevice s) {
  Dtype dt = at_least_float(a.dtype());
  return divide(array(1.0f, dt), a, s);
}

array sigmoid(const array& a, StreamOrDevice s) {
  reject_complex("sigmoid", a);
  return unary_float<Sigmoid>(a, s);
}
array erf(const array& a, StreamOrDevice s) {
  reject_complex("erf", a);
  return unary_float<Erf>(a, s);
}
array erfinv(const array& a, StreamOrDevice s) {
  reject_complex("erfinv", a);
  return unary_float<ErfInv>(a, s);
}

// Rounding an integer is the identity.
array floor(const array& a, StreamOrDevice s) {
  reject_complex("floor", a);
  if (!is_floating_point(a.dtype())) return a;
  return unary<Floor>(a, a.dtype(), s);
}

array ceil(const array& a, StreamOrDevice s) {
  reject_complex("ceil", a);
  if (!is_floating_point(a.dtype())) return a;
  return unary<Ceil>(a, a.dtype(), s);
}

array round(const array& a, int decimals, StreamOrDevice s) {
  if (is_integral(a.dtype()) && decimals < 0) {
    // To a multiple of 10^-decimals, halves to even (as MLX and NumPy),
    // in float64: exact below 2^53.
    auto scale = array(std::pow(10.0, -decimals), float64);
    auto q = unary<Round>(divide(astype(a, float64, s), scale, s), float64, s);
    return astype(multiply(q, scale, s), a.dtype(), s);
  }
  if (!is_inexact(a.dtype())) return a;
  if (decimals == 0) return unary<Round>(a, a.dtype(), s);
  auto scale = array(std::pow(10.0, decimals), a.dtype());
  return divide(unary<Round>(multiply(a, scale, s), a.dtype(), s), scale, s);
}

array logical_not(const array& a, StreamOrDevice s) {
  return unary<LogicalNot>(a, bool_, s);
}

array bitwise_invert(const array& a, StreamOrDevice s) {
  if (!is_integral(a.dtype()) && a.dtype() != bool_) {
    invalid("bitwise_invert",
            "needs an integer or bool input; got " + describe(a) + ".");
  }
  return unary<BitwiseInvert>(a, a.dtype(), s);
}

array isnan(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return full(a.shape(), array(false), s);
  return not_equal(a, a, s);
}

array isposinf(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return full(a.shape(), array(false), s);
  return equal(a, array(std::numeric_limits<float>::infinity(), a.dtype()), s);
}

array isneginf(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return full(a.shape(), array(false), s);
  return equal(a, array(-std::numeric_limits<float>::infinity(), a.dtype()),
               s);
}

array isinf(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return full(a.shape(), array(false), s);
  // A complex value is infinite when either part is.
  if (is_complex(a.dtype())) {
    return logical_or(isinf(real(a, s), s), isinf(imag(a, s), s), s);
  }
  return logical_or(isposinf(a, s), isneginf(a, s), s);
}

array isfinite(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return full(a.shape(), array(true), s);
  return logical_not(logical_or(isinf(a, s), isnan(a, s), s), s);
}

array stop_gradient(const array& a, StreamOrDevice s) {
  return unary<StopGradient>(a, a.dtype(), s);
}

array trunc(const array& a, StreamOrDevice s) {
  reject_complex("trunc", a);
  if (!is_inexact(a.dtype())) return a;
  return where(less(a, array(0, a.dtype()), s), ceil(a, s), floor(a, s), s);
}

array degrees(const array& a, StreamOrDevice s) {
  Dtype dt = at_least_float(a.dtype());
  return multiply(astype(a, dt, s), array(180.0 / std::numbers::pi, dt), s);
}

array radians(const array& a, StreamOrDevice s) {
  Dtype dt = at_least_float(a.dtype());
  return multiply(astype(a, dt, s), array(std::numbers::pi / 180.0, dt), s);
}

namespace {
// The largest finite value of a floating dtype.
double largest_finite(Dtype d) {
  if (d == float16) return 65504.0;
  if (d == bfloat16) return 3.3895313892515355e38;
  if (d == float64) return std::numeric_limits<double>::max();
  return std::numeric_limits<float>::max();
}
} // namespace

array nan_to_num(const array& a, float nan, std::optional<float> posinf,
                 std::optional<float> neginf, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    invalid("nan_to_num", "not supported for " + describe(a) + ".");
  }
  if (!is_inexact(a.dtype())) return a;
  Dtype dt = a.dtype();
  double big = largest_finite(dt);
  auto pos = posinf ? array(*posinf, dt) : array(big, dt);
  auto neg = neginf ? array(*neginf, dt) : array(-big, dt);
  auto out = where(isnan(a, s), array(nan, dt), a, s);
  out = where(isposinf(a, s), pos, out, s);
  return where(isneginf(a, s), neg, out, s);
}

array real(const array& a, StreamOrDevice s) {
  if (!is_complex(a.dtype())) return a;
  return array(a.shape(), float32, std::make_shared<Real>(to_stream(s)), {a});
}

array imag(const array& a, StreamOrDevice s) {
  if (!is_complex(a.dtype())) return zeros_like(a, s);
  return array(a.shape(), float32, std::make_shared<Imag>(to_stream(s)), {a});
}

array conjugate(const array& a, StreamOrDevice s) {
  if (!is_complex(a.dtype())) return a;
  return array(a.shape(), complex64, std::make_shared<Conjugate>(to_stream(s)),
               {a});
}

array conj(const array& a, StreamOrDevice s) { return conjugate(a, s); }

// ---- binary ----------------------------------------------------------------

array add(const array& a, const array& b, StreamOrDevice s) {
  return binary<Add>("add", a, b, {}, {}, s);
}

array subtract(const array& a, const array& b, StreamOrDevice s) {
  if (a.dtype() == bool_ && b.dtype() == bool_) {
    invalid("subtract", "not supported for two bool arrays; use "
                        "logical_xor / bitwise_xor instead.");
  }
  return binary<Subtract>("subtract", a, b, {}, {}, s);
}

array multiply(const array& a, const array& b, StreamOrDevice s) {
  return binary<Multiply>("multiply", a, b, {}, {}, s);
}

array divide(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = at_least_float(promote_types(a.dtype(), b.dtype()));
  return binary<Divide>("divide", a, b, dt, {}, s);
}

array floor_divide(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = promote_types(a.dtype(), b.dtype());
  if (is_complex(dt)) invalid("floor_divide", "not supported for complex64.");
  if (is_floating_point(dt)) return floor(divide(a, b, s), s);
  if (dt == bool_) dt = uint8;
  return binary<FloorDivide>("floor_divide", a, b, dt, {}, s);
}

array remainder(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = promote_types(a.dtype(), b.dtype());
  if (is_complex(dt)) invalid("remainder", "not supported for complex64.");
  if (dt == bool_) dt = uint8;
  return binary<Remainder>("remainder", a, b, dt, {}, s);
}

array power(const array& a, const array& b, StreamOrDevice s) {
  return binary<Power>("power", a, b, {}, {}, s);
}

array maximum(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = promote_types(a.dtype(), b.dtype());
  return binary<Maximum>("maximum", a, b, dt, {}, s);
}

array minimum(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = promote_types(a.dtype(), b.dtype());
  return binary<Minimum>("minimum", a, b, dt, {}, s);
}

array arctan2(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = at_least_float(promote_types(a.dtype(), b.dtype()));
  if (is_complex(dt)) invalid("arctan2", "not supported for complex64.");
  return binary<ArcTan2>("arctan2", a, b, dt, {}, s);
}

array logaddexp(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = at_least_float(promote_types(a.dtype(), b.dtype()));
  if (is_complex(dt)) {
    // As MLX: the larger (real part, then imaginary part) plus
    // log1p(exp(smaller - larger)).
    array x = astype(a, dt, s), y = astype(b, dt, s);
    array hi = maximum(x, y, s);
    return add(hi, log1p(exp(subtract(minimum(x, y, s), hi, s), s), s), s);
  }
  return binary<LogAddExp>("logaddexp", a, b, dt, {}, s);
}

array equal(const array& a, const array& b, StreamOrDevice s) {
  return binary<Equal>("equal", a, b, {}, bool_, s);
}
array not_equal(const array& a, const array& b, StreamOrDevice s) {
  return binary<NotEqual>("not_equal", a, b, {}, bool_, s);
}

array less(const array& a, const array& b, StreamOrDevice s) {
  return binary<Less>("less", a, b, {}, bool_, s);
}
array less_equal(const array& a, const array& b, StreamOrDevice s) {
  return binary<LessEqual>("less_equal", a, b, {}, bool_, s);
}
array greater(const array& a, const array& b, StreamOrDevice s) {
  return binary<Greater>("greater", a, b, {}, bool_, s);
}
array greater_equal(const array& a, const array& b, StreamOrDevice s) {
  return binary<GreaterEqual>("greater_equal", a, b, {}, bool_, s);
}
array logical_and(const array& a, const array& b, StreamOrDevice s) {
  return binary<LogicalAnd>("logical_and", a, b, bool_, bool_, s);
}
array logical_or(const array& a, const array& b, StreamOrDevice s) {
  return binary<LogicalOr>("logical_or", a, b, bool_, bool_, s);
}

array bitwise_and(const array& a, const array& b, StreamOrDevice s) {
  require_integral("bitwise_and", a, b);
  return binary<BitwiseAnd>("bitwise_and", a, b, {}, {}, s);
}
array bitwise_or(const array& a, const array& b, StreamOrDevice s) {
  require_integral("bitwise_or", a, b);
  return binary<BitwiseOr>("bitwise_or", a, b, {}, {}, s);
}
array bitwise_xor(const array& a, const array& b, StreamOrDevice s) {
  require_integral("bitwise_xor", a, b);
  return binary<BitwiseXor>("bitwise_xor", a, b, {}, {}, s);
}

namespace {
Dtype shift_dtype(const array& a, const array& b) {
  Dtype dt = promote_types(a.dtype(), b.dtype());
  return dt == bool_ ? uint8 : dt;
}
} // namespace

array left_shift(const array& a, const array& b, StreamOrDevice s) {
  require_integral("left_shift", a, b);
  return binary<LeftShift>("left_shift", a, b, shift_dtype(a, b), {}, s);
}
array right_shift(const array& a, const array& b, StreamOrDevice s) {
  require_integral("right_shift", a, b);
  return binary<RightShift>("right_shift", a, b, shift_dtype(a, b), {}, s);
}

array isclose(const array& a, const array& b, double rtol, double atol,
              bool equal_nan, StreamOrDevice s) {
  // |a - b| <= atol + rtol * |b|, with infinities equal only to themselves.
  Dtype dt = at_least_float(promote_types(a.dtype(), b.dtype()));
  auto x = astype(a, dt, s), y = astype(b, dt, s);
  auto rhs = add(array(atol, dt), multiply(array(rtol, dt), abs(y, s), s), s);
  // Only finite values are close by the bound (an infinite one makes it
  // infinite too).
  auto close = logical_and(less_equal(abs(subtract(x, y, s), s), rhs, s),
                           logical_and(isfinite(x, s), isfinite(y, s), s), s);
  auto inf_equal = logical_and(equal(x, y, s), isinf(x, s), s);
  auto out = logical_or(close, inf_equal, s);
  if (equal_nan) {
    out = logical_or(out, logical_and(isnan(x, s), isnan(y, s), s), s);
  }
  return out;
}

array allclose(const array& a, const array& b, double rtol, double atol,
               bool equal_nan, StreamOrDevice s) {
  return all(isclose(a, b, rtol, atol, equal_nan, s), false, s);
}

array array_equal(const array& a, const array& b, bool equal_nan,
                  StreamOrDevice s) {
  if (a.shape() != b.shape()) return array(false);
  Dtype dt = promote_types(a.dtype(), b.dtype());
  auto eq = equal_nan ? binary<NaNEqual>("array_equal", a, b, dt, bool_, s)
                      : equal(a, b, s);
  return all(eq, false, s);
}

array where(const array& condition, const array& x, const array& y,
            StreamOrDevice s) {
  auto stream = to_stream(s);
  Dtype dt = promote_types(x.dtype(), y.dtype());
  auto shape = detail::broadcast_shapes(
      detail::broadcast_shapes(condition.shape(), x.shape(), "where"),
      y.shape(), "where");
  std::vector<array> inputs = {
      detail::broadcast_operand(astype(condition, bool_, stream), shape,
                                stream),
      detail::broadcast_operand(astype(x, dt, stream), shape, stream),
      detail::broadcast_operand(astype(y, dt, stream), shape, stream)};
  return array(std::move(shape), dt, std::make_shared<Select>(stream),
               std::move(inputs));
}

array clip(const array& a, const std::optional<array>& a_min,
           const std::optional<array>& a_max, StreamOrDevice s) {
  if (!a_min && !a_max) {
    invalid("clip", "at least one of a_min and a_max must be given.");
  }
  array out = a;
  if (a_min) out = maximum(out, *a_min, s);
  if (a_max) out = minimum(out, *a_max, s);
  return out;
}

array operator-(const array& a) { return negative(a); }
array operator!(const array& a) { return logical_not(a); }
array operator~(const array& a) { return bitwise_invert(a); }
array operator+(const array& a, const array& b) { return add(a, b); }
array operator-(const array& a, const array& b) { return subtract(a, b); }
array operator*(const array& a, const array& b) { return multiply(a, b); }
array operator/(const array& a, const array& b) { return divide(a, b); }
array operator%(const array& a, const array& b) { return remainder(a, b); }
array operator==(const array& a, const array& b) { return equal(a, b); }
array operator!=(const array& a, const array& b) { return not_equal(a, b); }
array operator<(const array& a, const array& b) { return less(a, b); }
array operator<=(const array& a, const array& b) { return less_equal(a, b); }
array operator>(const array& a, const array& b) { return greater(a, b); }
array operator>=(const array& a, const array& b) { return greater_equal(a, b); }
array operator&&(const array& a, const array& b) { return logical_and(a, b); }
array operator||(const array& a, const array& b) { return logical_or(a, b); }
array operator&(const array& a, const array& b) { return bitwise_and(a, b); }
array operator|(const array& a, const array& b) { return bitwise_or(a, b); }
array operator^(const array& a, const array& b) { return bitwise_xor(a, b); }
array operator<<(const array& a, const array& b) { return left_shift(a, b); }
array operator>>(const array& a, const array& b) { return right_shift(a, b); }

} // namespace kiln
