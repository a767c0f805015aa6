// Scalar functors named after their primitives. They see compute types only
// (float16/bfloat16 arrive widened to float). A functor that has no meaning
// for complex numbers says so with `complex = false`.
// The CPU JIT embeds this file in its generated sources without standard
// headers: use only the std names that jit_prelude.h declares.
#pragma once

#ifndef KILN_JIT_SOURCE
#include <climits>
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "kiln/core/cast.h"
#endif

namespace kiln::detail {

template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T>;

struct Abs {
  template <typename T>
  auto operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return T(std::abs(x), 0.0f);
    } else if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) {
      return x;
    } else if constexpr (is_float_v<T>) {
      return std::abs(x); // clears the sign of -0.0 too
    } else {
      return static_cast<T>(x < T(0) ? -x : x);
    }
  }
};

struct Negative {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else if constexpr (std::is_integral_v<T>) {
      // Wraps like NumPy instead of overflowing (undefined for INT_MIN).
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(U(0) - static_cast<U>(x));
    } else {
      return -x;
    }
  }
};

struct Sign {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      float a = std::abs(x);
      return a == 0.0f ? T(0.0f) : x / a;
    } else if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) {
      return x != T(0);
    } else if constexpr (is_float_v<T>) {
      if (std::isnan(x)) return x;
      return static_cast<T>((T(0) < x) - (x < T(0)));
    } else {
      return static_cast<T>((T(0) < x) - (x < T(0)));
    }
  }
};

struct Square {
  template <typename T>
  T operator()(T x) const {
    return static_cast<T>(x * x);
  }
};

#define KILN_STD_UNARY(Name, fn, has_complex) \
  struct Name {                               \
    static constexpr bool complex = has_complex; \
    template <typename T>                     \
    T operator()(T x) const {                 \
      return std::fn(x);                      \
    }                                         \
  };
KILN_STD_UNARY(Exp, exp, true)
KILN_STD_UNARY(Expm1, expm1, false)
KILN_STD_UNARY(Log, log, true)
KILN_STD_UNARY(Log10, log10, true)
KILN_STD_UNARY(Sin, sin, true)
KILN_STD_UNARY(Cos, cos, true)
KILN_STD_UNARY(Tan, tan, true)
KILN_STD_UNARY(ArcSin, asin, true)
KILN_STD_UNARY(ArcCos, acos, true)
KILN_STD_UNARY(ArcTan, atan, true)
KILN_STD_UNARY(Sinh, sinh, true)
KILN_STD_UNARY(Cosh, cosh, true)
KILN_STD_UNARY(Tanh, tanh, true)
KILN_STD_UNARY(ArcSinh, asinh, true)
KILN_STD_UNARY(ArcCosh, acosh, true)
KILN_STD_UNARY(ArcTanh, atanh, true)
KILN_STD_UNARY(Sqrt, sqrt, true)
KILN_STD_UNARY(Erf, erf, false)
KILN_STD_UNARY(Floor, floor, false)
KILN_STD_UNARY(Ceil, ceil, false)
#undef KILN_STD_UNARY

// log1p and log2 of a complex value as MLX's: log(1 + z), log(z) / ln 2.
struct Log1p {
  static constexpr bool complex = true;
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return std::log(T(1.0f) + x);
    } else {
      return std::log1p(x);
    }
  }
};

struct Log2 {
  static constexpr bool complex = true;
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return std::log(x) / 0.693147180559945309f;
    } else {
      return std::log2(x);
    }
  }
};

// nearbyint rounds halves to even, as NumPy's and MLX's round do; a
// complex value rounds each part.
struct Round {
  static constexpr bool complex = true;
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return T(std::nearbyint(x.real()), std::nearbyint(x.imag()));
    } else {
      return std::nearbyint(x);
    }
  }
};

struct Rsqrt {
  template <typename T>
  T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};

struct Sigmoid {
  static constexpr bool complex = false;
  template <typename T>
  T operator()(T x) const {
    // Never exponentiates a large positive number (exp(-|x|) <= 1, no
    // inf on the way), and one exp whichever the sign, so loops of it
    // vectorize (a select, not a branch).
    T t = std::exp(-std::abs(x));
    return x >= T(0) ? T(1) / (T(1) + t) : t / (T(1) + t);
  }
};

/** Inverse error function: Giles' approximation refined by two Newton steps
 *  in double precision, so float64 results are accurate to a few ULP. */
struct ErfInv {
  static constexpr bool complex = false;
  template <typename T>
  T operator()(T xt) const {
    double x = static_cast<double>(xt);
    if (std::isnan(x) || x < -1.0 || x > 1.0) {
      return std::numeric_limits<T>::quiet_NaN();
    }
    if (x == 1.0) return std::numeric_limits<T>::infinity();
    if (x == -1.0) return -std::numeric_limits<T>::infinity();
    double w = -std::log((1.0 - x) * (1.0 + x)), p;
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
      w = std::sqrt(w) - 3.0;
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
      double err = std::erf(y) - x;
      y -= err / (two_over_sqrt_pi * std::exp(-y * y));
    }
    return static_cast<T>(y);
  }
};

struct LogicalNot {
  template <typename T>
  bool operator()(T x) const {
    return !cast_to<bool>(x);
  }
};

struct BitwiseInvert {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return !x;
    } else {
      return static_cast<T>(~x);
    }
  }
};

struct StopGradient {
  template <typename T>
  T operator()(T x) const {
    return x;
  }
};

// ---- binary ----------------------------------------------------------------

struct Add {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a || b;
    } else {
      return static_cast<T>(a + b);
    }
  }
};

struct Subtract {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
};

struct Multiply {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && b;
    } else {
      return static_cast<T>(a * b);
    }
  }
};

struct Divide {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Integer division by zero gives 0 (NumPy) instead of a crash.
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return Negative{}(a);
      }
    }
    return static_cast<T>(a / b);
  }
};

struct FloorDivide {
  static constexpr bool complex = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return Negative{}(a);
        T q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
      } else {
        return a / b;
      }
    } else {
      return std::floor(a / b);
    }
  }
};

struct Remainder {
  static constexpr bool complex = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      } else {
        return a % b;
      }
    } else {
      // Python's modulo: the result takes the sign of the divisor.
      T r = std::fmod(a, b);
      if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
      return r;
    }
  }
};

struct Power {
  template <typename T>
  T operator()(T base, T exp) const {
    if constexpr (std::is_same_v<T, bool>) {
      return base || !exp;
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>) {
        if (exp < 0) {
          // Only 1 and -1 have integer reciprocals.
          if (base == 1) return 1;
          if (base == -1) return (exp % 2) ? -1 : 1;
          return 0;
        }
      }
      // Wrapping products, in an unsigned type at least as wide as
      // unsigned int (narrower ones would promote to int and overflow).
      using U = decltype(std::make_unsigned_t<T>{} + 0u);
      U result = 1, b = static_cast<U>(base);
      while (exp) {
        if (exp & 1) result *= b;
        exp >>= 1;
        b *= b;
      }
      return static_cast<T>(result);
    } else {
      return std::pow(base, exp);
    }
  }
};

/** Complex values order as MLX's: by real part, then imaginary part. */
template <typename T>
bool complex_less(T a, T b) {
  return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
}

template <typename T>
bool complex_is_nan(T a) {
  return std::isnan(a.real()) || std::isnan(a.imag());
}

struct Maximum {
  static constexpr bool complex = true;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (is_complex_v<T>) {
      if (complex_is_nan(a)) return a;
      return complex_less(b, a) ? a : b;
    } else {
      if constexpr (is_float_v<T>) {
        if (std::isnan(a)) return a; // NaN propagates
      }
      return a > b ? a : b;
    }
  }
};

struct Minimum {
  static constexpr bool complex = true;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (is_complex_v<T>) {
      if (complex_is_nan(a)) return a;
      return complex_less(a, b) ? a : b;
    } else {
      if constexpr (is_float_v<T>) {
        if (std::isnan(a)) return a;
      }
      return a < b ? a : b;
    }
  }
};

struct ArcTan2 {
  static constexpr bool complex = false;
  template <typename T>
  T operator()(T a, T b) const {
    return std::atan2(a, b);
  }
};

struct LogAddExp {
  static constexpr bool complex = false;
  template <typename T>
  T operator()(T a, T b) const {
    // The exp and log1p run for every element and selects pick the
    // special cases, so fused loops of it vectorize.
    T m = a > b ? a : b;
    T r = m + std::log1p(std::exp(-std::abs(a - b)));
    r = std::isinf(m) ? m : r; // both -inf, or one is +inf
    return std::isnan(a) || std::isnan(b) ? a + b : r;
  }
};

#define KILN_COMPARISON(Name, expr, has_complex)    \
  struct Name {                                     \
    static constexpr bool complex = has_complex;    \
    template <typename T>                           \
    bool operator()(T a, T b) const {               \
      return expr;                                  \
    }                                               \
  };
KILN_COMPARISON(Equal, a == b, true)
KILN_COMPARISON(NotEqual, a != b, true)
// Complex values compare as MLX orders them: by real part, then imaginary
// part (a NaN part makes every order comparison false).
#define KILN_ORDER(Name, op)                                              \
  struct Name {                                                           \
    static constexpr bool complex = true;                                 \
    template <typename T>                                                 \
    bool operator()(T a, T b) const {                                     \
      if constexpr (is_complex_v<T>) {                                    \
        return a.real() == b.real() ? a.imag() op b.imag()                \
                                    : a.real() op b.real();               \
      } else {                                                            \
        return a op b;                                                    \
      }                                                                   \
    }                                                                     \
  };
KILN_ORDER(Less, <)
KILN_ORDER(LessEqual, <=)
KILN_ORDER(Greater, >)
KILN_ORDER(GreaterEqual, >=)
#undef KILN_ORDER
KILN_COMPARISON(LogicalAnd, cast_to<bool>(a) && cast_to<bool>(b), true)
KILN_COMPARISON(LogicalOr, cast_to<bool>(a) || cast_to<bool>(b), true)
#undef KILN_COMPARISON

/** equal() with equal_nan=true: NaNs compare equal to each other. */
struct NaNEqual {
  template <typename T>
  bool operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      return a == b || (std::isnan(a) && std::isnan(b));
    } else if constexpr (is_complex_v<T>) {
      auto nan = [](T z) { return std::isnan(z.real()) || std::isnan(z.imag()); };
      return a == b || (nan(a) && nan(b));
    } else {
      return a == b;
    }
  }
};

struct BitwiseAnd {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};

struct BitwiseOr {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};

struct BitwiseXor {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};

// Shifts by negative or >= bit-width amounts are defined (NumPy's results)
// instead of being undefined behaviour.
struct LeftShift {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      if (b < T(0) || b >= T(sizeof(T) * CHAR_BIT)) return T(0);
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) << b);
    }
  }
};

struct RightShift {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      if (b < T(0) || b >= T(sizeof(T) * CHAR_BIT)) {
        return a < T(0) ? T(-1) : T(0);
      }
      return static_cast<T>(a >> b);
    }
  }
};

struct Select {
  template <typename T>
  T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};

template <typename Op, typename T>
inline constexpr bool supports_complex() {
  if constexpr (requires { Op::complex; }) {
    return Op::complex;
  } else {
    return true;
  }
}

} // namespace kiln::detail
