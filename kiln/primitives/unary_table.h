// The unary elementwise ops: one row of the table and one functor each. The
// primitive classes, their CPU evals, the CPU's vector forms, the device's
// precompiled kernels, the gradients, the Python bindings and the names in
// exported functions are generated from the rows; the functors compile for
// the host, the CPU JIT, nvcc and NVRTC (the vocabulary they use is in
// backend/common/functor_math.h). A new unary op adds its row and its
// functor here, its op in ops/elementwise.{h,cpp}, and its row of the op
// check (python/tests/test_op_table.py).
//
// X(Name, op, kind, vector, aot, grad, partial)
//   Name     the primitive class and its functor
//   op       the op, kiln::op(a, stream), bound to Python under its name and
//            what an exported function's node of this primitive imports as
//   kind     the dtypes it takes and gives: all (every dtype, kept),
//            inexact (floating and, where the functor's `complex` allows,
//            complex64), integral (integers and bool), predicate (every dtype
//            to bool), magnitude (complex64 to float32, others kept)
//   vector   the libm function whose libmvec form the CPU's unfused kernels
//            call for float32/float64 runs, or none
//   aot      floats: the CUDA build precompiles float32/float16/bfloat16
//            kernels; none: NVRTC compiles it at first use
//   grad     expr: d out / d x is `partial`, an expression in x (the input)
//            and y (the output); none: no gradient (zero)
#pragma once

// clang-format off
#define KILN_UNARY_OPS(X)                                                    \
  X(Abs, abs, magnitude, none, floats, expr, sign(x))                        \
  X(Negative, negative, all, none, floats, expr,                             \
    full_like(x, scalar(-1, x)))                                             \
  X(Sign, sign, all, none, none, none, _)                                    \
  X(Square, square, all, none, floats, expr, multiply(scalar(2, x), x))      \
  X(Exp, exp, inexact, exp, floats, expr, y)                                 \
  X(Expm1, expm1, inexact, expm1, none, expr, add(y, scalar(1, y)))          \
  X(Log, log, inexact, log, floats, expr, reciprocal(x))                     \
  X(Log1p, log1p, inexact, log1p, floats, expr,                             \
    reciprocal(add(x, scalar(1, x))))                                        \
  X(Log2, log2, inexact, log2, none, expr,                                   \
    reciprocal(multiply(x, scalar(std::log(2.0), x))))                       \
  X(Log10, log10, inexact, log10, none, expr,                                \
    reciprocal(multiply(x, scalar(std::log(10.0), x))))                      \
  X(Sin, sin, inexact, sin, floats, expr, cos(x))                            \
  X(Cos, cos, inexact, cos, floats, expr, negative(sin(x)))                  \
  X(Tan, tan, inexact, tan, none, expr, add(scalar(1, y), square(y)))        \
  X(ArcSin, arcsin, inexact, asin, none, expr,                               \
    rsqrt(subtract(scalar(1, x), square(x))))                                \
  X(ArcCos, arccos, inexact, acos, none, expr,                               \
    negative(rsqrt(subtract(scalar(1, x), square(x)))))                      \
  X(ArcTan, arctan, inexact, atan, none, expr,                               \
    reciprocal(add(scalar(1, x), square(x))))                                \
  X(Sinh, sinh, inexact, sinh, none, expr, cosh(x))                          \
  X(Cosh, cosh, inexact, cosh, none, expr, sinh(x))                          \
  X(Tanh, tanh, inexact, tanh, floats, expr,                                \
    subtract(scalar(1, y), square(y)))                                       \
  X(ArcSinh, arcsinh, inexact, asinh, none, expr,                            \
    rsqrt(add(square(x), scalar(1, x))))                                     \
  X(ArcCosh, arccosh, inexact, acosh, none, expr,                            \
    rsqrt(subtract(square(x), scalar(1, x))))                                \
  X(ArcTanh, arctanh, inexact, atanh, none, expr,                            \
    reciprocal(subtract(scalar(1, x), square(x))))                           \
  X(Sqrt, sqrt, inexact, none, floats, expr, divide(scalar(0.5, y), y))      \
  X(Rsqrt, rsqrt, inexact, none, floats, expr,                               \
    multiply(scalar(-0.5, y), divide(y, x)))                                 \
  X(Sigmoid, sigmoid, inexact, none, floats, expr,                           \
    multiply(y, subtract(scalar(1, y), y)))                                  \
  X(Erf, erf, inexact, erf, floats, expr,                                    \
    multiply(scalar(2 / std::sqrt(std::numbers::pi), x),                     \
             exp(negative(square(x)))))                                      \
  X(ErfInv, erfinv, inexact, none, none, expr,                               \
    multiply(scalar(std::sqrt(std::numbers::pi) / 2, y), exp(square(y))))    \
  X(Floor, floor, inexact, none, none, none, _)                              \
  X(Ceil, ceil, inexact, none, none, none, _)                                \
  X(Round, round, inexact, nearbyint, none, none, _)                         \
  X(LogicalNot, logical_not, predicate, none, none, none, _)                 \
  X(BitwiseInvert, bitwise_invert, integral, none, none, none, _)            \
  X(StopGradient, stop_gradient, all, none, none, none, _)
// clang-format on

#ifndef KILN_JIT_SOURCE
#include "kiln/backend/common/functor_math.h"
#endif

KILN_FUNCTORS_BEGIN

// A functor that has no meaning for complex numbers says so with
// `complex = false`; complex64 inputs to its op raise, and the kernels are
// never instantiated for them.

struct Abs {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return T(math::abs(x), 0.0f); // |z| arrives as the real part
    } else if constexpr (is_unsigned_v<T> || is_same_v<T, bool>) {
      return x;
    } else if constexpr (is_float_v<T>) {
      return math::abs(x); // clears the sign of -0.0 too
    } else {
      return static_cast<T>(x < T(0) ? -x : x);
    }
  }
};

struct Negative {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    if constexpr (is_same_v<T, bool>) {
      return x;
    } else if constexpr (is_integral_v<T>) {
      // Wraps like NumPy instead of overflowing (undefined for INT_MIN).
      using U = make_unsigned_t<T>;
      return static_cast<T>(U(0) - static_cast<U>(x));
    } else {
      return -x;
    }
  }
};

struct Sign {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      float a = math::abs(x);
      return a == 0.0f ? T(0.0f) : x / a;
    } else if constexpr (is_unsigned_v<T> || is_same_v<T, bool>) {
      return x != T(0);
    } else {
      if constexpr (is_float_v<T>) {
        if (math::isnan(x)) return x;
      }
      return static_cast<T>((T(0) < x) - (x < T(0)));
    }
  }
};

struct Square {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    return static_cast<T>(x * x);
  }
};

// The functors that are one libm call.
#define KILN_LIBM_UNARY(Name, fn, has_complex) \
  struct Name {                                \
    static constexpr bool complex = has_complex; \
    template <typename T>                      \
    KILN_FN T operator()(T x) const {          \
      return math::fn(x);                      \
    }                                          \
  };
KILN_LIBM_UNARY(Exp, exp, true)
KILN_LIBM_UNARY(Expm1, expm1, false)
KILN_LIBM_UNARY(Log, log, true)
KILN_LIBM_UNARY(Log10, log10, true)
KILN_LIBM_UNARY(Sin, sin, true)
KILN_LIBM_UNARY(Cos, cos, true)
KILN_LIBM_UNARY(Tan, tan, true)
KILN_LIBM_UNARY(ArcSin, asin, true)
KILN_LIBM_UNARY(ArcCos, acos, true)
KILN_LIBM_UNARY(ArcTan, atan, true)
KILN_LIBM_UNARY(Sinh, sinh, true)
KILN_LIBM_UNARY(Cosh, cosh, true)
KILN_LIBM_UNARY(Tanh, tanh, true)
KILN_LIBM_UNARY(ArcSinh, asinh, true)
KILN_LIBM_UNARY(ArcCosh, acosh, true)
KILN_LIBM_UNARY(ArcTanh, atanh, true)
KILN_LIBM_UNARY(Sqrt, sqrt, true)
KILN_LIBM_UNARY(Erf, erf, false)
KILN_LIBM_UNARY(Floor, floor, false)
KILN_LIBM_UNARY(Ceil, ceil, false)
#undef KILN_LIBM_UNARY

// log1p and log2 of a complex value as MLX's: log(1 + z), log(z) / ln 2.
struct Log1p {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return math::log(T(1.0f) + x);
    } else {
      return math::log1p(x);
    }
  }
};

struct Log2 {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return math::log(x) / 0.693147180559945309f;
    } else {
      return math::log2(x);
    }
  }
};

// nearbyint rounds halves to even, as NumPy's and MLX's round do; a
// complex value rounds each part.
struct Round {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return T(math::nearbyint(math::real(x)),
               math::nearbyint(math::imag(x)));
    } else {
      return math::nearbyint(x);
    }
  }
};

struct Rsqrt {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    return T(1) / math::sqrt(x);
  }
};

struct Sigmoid {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T x) const {
    // Never exponentiates a large positive number (exp(-|x|) <= 1, no
    // inf on the way), and one exp whichever the sign, so loops of it
    // vectorize (a select, not a branch).
    T t = math::exp(-math::abs(x));
    return x >= T(0) ? T(1) / (T(1) + t) : t / (T(1) + t);
  }
};

/** Inverse error function: Giles' approximation refined by two Newton steps
 *  in double precision, so float64 results are accurate to a few ULP. */
struct ErfInv {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T xt) const {
    double x = static_cast<double>(xt);
    if (math::isnan(x) || x < -1.0 || x > 1.0) return math::quiet_nan<T>();
    if (x == 1.0) return math::infinity<T>();
    if (x == -1.0) return -math::infinity<T>();
    double w = -math::log((1.0 - x) * (1.0 + x)), p;
    if (w < 5.0) {
      w -= 2.5;
      p = 2.81022636e-08;
      p = 3.43273939e-07 + p * w;
      p = -3.5233877e-06 + p * w;
      p = -4.39150654e-06 + p * w;
      p = 0.00021858087 + p * w;
      p = -0.00125372503 + p * w;
      p = -0.00417768164 + p * w;
      p = 0.246640727 + p * w;
      p = 1.50140941 + p * w;
    } else {
      w = math::sqrt(w) - 3.0;
      p = -0.000200214257;
      p = 0.000100950558 + p * w;
      p = 0.00134934322 + p * w;
      p = -0.00367342844 + p * w;
      p = 0.00573950773 + p * w;
      p = -0.0076224613 + p * w;
      p = 0.00943887047 + p * w;
      p = 1.00167406 + p * w;
      p = 2.83297682 + p * w;
    }
    double y = p * x;
    const double two_over_sqrt_pi = 1.1283791670955126;
    for (int i = 0; i < 2; ++i) {
      double err = math::erf(y) - x;
      y -= err / (two_over_sqrt_pi * math::exp(-y * y));
    }
    return static_cast<T>(y);
  }
};

struct LogicalNot {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN bool operator()(T x) const {
    return !(x != T(0)); // NaN is true, as for cast_to<bool>
  }
};

struct BitwiseInvert {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T x) const {
    if constexpr (is_same_v<T, bool>) {
      return !x;
    } else {
      return static_cast<T>(~x);
    }
  }
};

struct StopGradient {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T x) const {
    return x;
  }
};

KILN_FUNCTORS_END
