// The binary elementwise ops: one row of the table and one functor each,
// as unary_table.h is for the unary ones (its head says what is generated
// from the rows), and the functor of Select, the one ternary op.
//
// X(Name, op, kind, vector, aot, grad, da, db)
//   Name     the primitive class and its functor
//   op       the op, kiln::op(a, b, stream), or none where the primitive is
//            reached through another op's parameter (equal's equal_nan)
//   kind     the dtypes it takes (both inputs have one dtype): all, numeric
//            (not bool), inexact (floating, and complex64 where the functor
//            allows), integral (integers and bool); predicate: every dtype,
//            the output is bool
//   vector   the libm function whose libmvec form the CPU's unfused kernels
//            call for float32/float64 runs, or none
//   aot      what the CUDA build precompiles: arith (float32, float16,
//            bfloat16, int32), compare (the same, to bool), float (float32
//            only), none (NVRTC compiles it at first use)
//   grad     expr: d y / d a is `da` and d y / d b is `db`, expressions in a,
//            b and y; none: no gradient (zero)
#pragma once

#ifndef KILN_JIT_SOURCE
#include "kiln/primitives/unary_table.h"
#endif

// clang-format off
#define KILN_BINARY_OPS(X)                                                   \
  X(Add, add, all, none, arith, expr, ones_like(a), ones_like(b))            \
  X(Subtract, subtract, numeric, none, arith, expr, ones_like(a),            \
    full_like(b, scalar(-1, b)))                                             \
  X(Multiply, multiply, all, none, arith, expr, b, a)                        \
  X(Divide, divide, numeric, none, arith, expr, reciprocal(b),               \
    negative(divide(y, b)))                                                  \
  X(FloorDivide, floor_divide, numeric, none, none, none, _, _)              \
  /* a mod b = a - b * floor(a / b) */                                       \
  X(Remainder, remainder, numeric, none, none, expr, ones_like(a),           \
    negative(floor_divide(a, b)))                                            \
  X(Power, power, all, pow, float, expr,                                     \
    multiply(b, power(a, subtract(b, scalar(1, b)))),                        \
    multiply(y, log(where(greater(a, scalar(0, a)), a, ones_like(a)))))      \
  /* Ties send the whole gradient to the second argument, as in MLX (relu */ \
  /* = maximum(x, 0) has gradient 0 at 0, as in PyTorch). */                 \
  X(Maximum, maximum, all, none, arith, expr,                              \
    astype(greater(a, b), a.dtype()),                                        \
    astype(less_equal(a, b), b.dtype()))                                     \
  X(Minimum, minimum, all, none, arith, expr, astype(less(a, b), a.dtype()), \
    astype(greater_equal(a, b), b.dtype()))                                  \
  X(ArcTan2, arctan2, inexact, atan2, none, expr,                            \
    divide(b, add(square(a), square(b))),                                    \
    negative(divide(a, add(square(a), square(b)))))                          \
  X(LogAddExp, logaddexp, inexact, none, none, expr, exp(subtract(a, y)),    \
    exp(subtract(b, y)))                                                     \
  X(Equal, equal, predicate, none, compare, none, _, _)                      \
  X(NaNEqual, none, predicate, none, none, none, _, _)                       \
  X(NotEqual, not_equal, predicate, none, none, none, _, _)                  \
  X(Less, less, predicate, none, compare, none, _, _)                        \
  X(LessEqual, less_equal, predicate, none, none, none, _, _)                \
  X(Greater, greater, predicate, none, compare, none, _, _)                  \
  X(GreaterEqual, greater_equal, predicate, none, none, none, _, _)          \
  X(LogicalAnd, logical_and, predicate, none, none, none, _, _)              \
  X(LogicalOr, logical_or, predicate, none, none, none, _, _)                \
  X(BitwiseAnd, bitwise_and, integral, none, none, none, _, _)               \
  X(BitwiseOr, bitwise_or, integral, none, none, none, _, _)                 \
  X(BitwiseXor, bitwise_xor, integral, none, none, none, _, _)               \
  X(LeftShift, left_shift, integral, none, none, none, _, _)                 \
  X(RightShift, right_shift, integral, none, none, none, _, _)
// clang-format on

KILN_FUNCTORS_BEGIN

struct Add {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_same_v<T, bool>) {
      return a || b;
    } else {
      return static_cast<T>(a + b);
    }
  }
};

struct Subtract {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
};

struct Multiply {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_same_v<T, bool>) {
      return a && b;
    } else {
      return static_cast<T>(a * b);
    }
  }
};

struct Divide {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_integral_v<T>) {
      // Integer division by zero gives 0 (NumPy) instead of a trap.
      if (b == T(0)) return T(0);
      if constexpr (is_signed_v<T>) {
        if (b == T(-1)) return Negative{}(a);
      }
    }
    return static_cast<T>(a / b);
  }
};

struct FloorDivide {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (is_signed_v<T>) {
        if (b == T(-1)) return Negative{}(a);
        T q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
      } else {
        return a / b;
      }
    } else {
      return math::floor(a / b);
    }
  }
};

struct Remainder {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (is_signed_v<T>) {
        if (b == T(-1)) return T(0);
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      } else {
        return a % b;
      }
    } else {
      // Python's modulo: the result takes the sign of the divisor.
      T r = math::fmod(a, b);
      if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
      return r;
    }
  }
};

struct Power {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T base, T exp) const {
    if constexpr (is_same_v<T, bool>) {
      return base || !exp;
    } else if constexpr (is_integral_v<T>) {
      if constexpr (is_signed_v<T>) {
        if (exp < 0) {
          // Only 1 and -1 have integer reciprocals.
          if (base == 1) return 1;
          if (base == -1) return (exp % 2) ? -1 : 1;
          return 0;
        }
      }
      // Wrapping products, in an unsigned type at least as wide as
      // unsigned int (narrower ones would promote to int and overflow).
      using U = decltype(make_unsigned_t<T>{} + 0u);
      U result = 1, b = static_cast<U>(base);
      while (exp) {
        if (exp & 1) result *= b;
        exp >>= 1;
        b *= b;
      }
      return static_cast<T>(result);
    } else {
      return math::pow(base, exp);
    }
  }
};

/** Complex values order as MLX's: by real part, then imaginary part; a NaN
 *  in the part compared makes the comparison false. */
#define KILN_COMPLEX_ORDER(op)                                        \
  (math::real(a) == math::real(b) ? math::imag(a) op math::imag(b)   \
                                  : math::real(a) op math::real(b))

template <typename T>
KILN_FN bool has_nan(T a) {
  if constexpr (is_complex_v<T>) {
    return math::isnan(math::real(a)) || math::isnan(math::imag(a));
  } else if constexpr (is_float_v<T>) {
    return math::isnan(a);
  } else {
    return false;
  }
}

// NaN propagates from either argument.
struct Maximum {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if (has_nan(a)) return a;
    if constexpr (is_complex_v<T>) {
      return KILN_COMPLEX_ORDER(>) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

struct Minimum {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if (has_nan(a)) return a;
    if constexpr (is_complex_v<T>) {
      return KILN_COMPLEX_ORDER(<) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct ArcTan2 {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    return math::atan2(a, b);
  }
};

struct LogAddExp {
  // complex64 reaches this through logcumsumexp's scan only, as MLX's does.
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_complex_v<T>) {
      // The larger value (real part, then imaginary part) plus
      // log(1 + exp(smaller - larger)), from -inf + 0i.
      T hi = Maximum{}(a, b), lo = Minimum{}(a, b);
      if (math::real(hi) == -math::infinity<float>()) return hi;
      return hi + math::log(T(1.0f) + math::exp(lo - hi));
    } else {
      // The exp and log1p run for every element and selects pick the
      // special cases, so fused loops of it vectorize.
      T m = a > b ? a : b;
      T r = m + math::log1p(math::exp(-math::abs(a - b)));
      r = math::isinf(m) ? m : r; // both -inf, or one is +inf
      return math::isnan(a) || math::isnan(b) ? a + b : r;
    }
  }
};

#define KILN_COMPARISON(Name, expr)           \
  struct Name {                               \
    static constexpr bool complex = true;     \
    template <typename T>                     \
    KILN_FN bool operator()(T a, T b) const { \
      return expr;                            \
    }                                         \
  };
KILN_COMPARISON(Equal, a == b)
KILN_COMPARISON(NotEqual, a != b)
/** equal() with equal_nan=true: NaNs compare equal to each other. */
KILN_COMPARISON(NaNEqual, a == b || (has_nan(a) && has_nan(b)))
KILN_COMPARISON(LogicalAnd, a != T(0) && b != T(0))
KILN_COMPARISON(LogicalOr, a != T(0) || b != T(0))
#undef KILN_COMPARISON

#define KILN_ORDER(Name, op)                  \
  struct Name {                               \
    static constexpr bool complex = true;     \
    template <typename T>                     \
    KILN_FN bool operator()(T a, T b) const { \
      if constexpr (is_complex_v<T>) {        \
        return KILN_COMPLEX_ORDER(op);        \
      } else {                                \
        return a op b;                        \
      }                                       \
    }                                         \
  };
KILN_ORDER(Less, <)
KILN_ORDER(LessEqual, <=)
KILN_ORDER(Greater, >)
KILN_ORDER(GreaterEqual, >=)
#undef KILN_ORDER
#undef KILN_COMPLEX_ORDER

#define KILN_BITWISE(Name, op)               \
  struct Name {                              \
    static constexpr bool complex = false;   \
    template <typename T>                    \
    KILN_FN T operator()(T a, T b) const {   \
      return static_cast<T>(a op b);         \
    }                                        \
  };
KILN_BITWISE(BitwiseAnd, &)
KILN_BITWISE(BitwiseOr, |)
KILN_BITWISE(BitwiseXor, ^)
#undef KILN_BITWISE

// Shifts by negative or >= bit-width amounts give NumPy's results instead
// of undefined behaviour.
struct LeftShift {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_same_v<T, bool>) {
      return a && !b;
    } else {
      if (b < T(0) || b >= T(sizeof(T) * 8)) return T(0);
      using U = make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) << b);
    }
  }
};

struct RightShift {
  static constexpr bool complex = false;
  template <typename T>
  KILN_FN T operator()(T a, T b) const {
    if constexpr (is_same_v<T, bool>) {
      return a && !b;
    } else {
      if (b < T(0) || b >= T(sizeof(T) * 8)) {
        return a < T(0) ? T(-1) : T(0);
      }
      return static_cast<T>(a >> b);
    }
  }
};

struct Select {
  static constexpr bool complex = true;
  template <typename T>
  KILN_FN T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};

KILN_FUNCTORS_END
