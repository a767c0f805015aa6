// Binary and ternary device functors, named after their primitives, with the
// CPU functors' semantics (kiln/backend/cpu/functors.h). They see compute
// types: float16/bfloat16 arrive as float.
#pragma once

#include "kiln/backend/cuda/device/unary_ops.cuh"

namespace kiln::cuda {

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    if constexpr (is_same_v<T, bool>) {
      return a || b;
    } else {
      return static_cast<T>(a + b);
    }
  }
};

struct Subtract {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
};

struct Multiply {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    if constexpr (is_same_v<T, bool>) {
      return a && b;
    } else {
      return static_cast<T>(a * b);
    }
  }
};

struct Divide {
  template <typename T>
  __device__ T operator()(T a, T b) const {
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
  template <typename T>
  __device__ T operator()(T a, T b) const {
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
  template <typename T>
  __device__ T operator()(T a, T b) const {
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
  template <typename T>
  __device__ T operator()(T base, T exp) const {
    if constexpr (is_integral_v<T>) {
      if constexpr (is_signed_v<T>) {
        if (exp < 0) {
          // Only 1 and -1 have integer reciprocals.
          if (base == 1) return 1;
          if (base == -1) return (exp % 2) ? -1 : 1;
          return 0;
        }
      }
      T result = 1;
      while (exp) {
        if (exp & 1) result = static_cast<T>(result * base);
        exp >>= 1;
        base = static_cast<T>(base * base);
      }
      return result;
    } else {
      return math::pow(base, exp);
    }
  }
};

struct Maximum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    if constexpr (is_float_v<T> || is_complex_v<T>) {
      if (math::isnan(a)) return a; // NaN propagates
    }
    return a > b ? a : b;
  }
};

struct Minimum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    if constexpr (is_float_v<T> || is_complex_v<T>) {
      if (math::isnan(a)) return a;
    }
    return a < b ? a : b;
  }
};

struct ArcTan2 {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return math::atan2(a, b);
  }
};

struct LogAddExp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    if constexpr (is_complex_v<T>) {
      // complex64 reaches this through logcumsumexp only, as the CPU's
      // scan (and MLX's): the larger value (real part, then imaginary
      // part) plus log(1 + exp(smaller - larger)), from -inf + 0i.
      T hi = Maximum{}(a, b), lo = Minimum{}(a, b);
      if (hi.re == -math::infinity<float>()) return hi;
      return hi + math::log(T(1.0f) + math::exp(lo - hi));
    }
    if (math::isnan(a) || math::isnan(b)) return a + b;
    T m = a > b ? a : b;
    if (math::isinf(m)) return m; // both -inf, or one is +inf
    return m + math::log1p(math::exp(-math::abs(a - b)));
  }
};

#define KILN_DEVICE_COMPARISON(Name, expr)       \
  struct Name {                                  \
    template <typename T>                        \
    __device__ bool operator()(T a, T b) const { \
      return expr;                               \
    }                                            \
  };
KILN_DEVICE_COMPARISON(Equal, a == b)
KILN_DEVICE_COMPARISON(NotEqual, a != b)
KILN_DEVICE_COMPARISON(Less, a < b)
KILN_DEVICE_COMPARISON(LessEqual, a <= b)
KILN_DEVICE_COMPARISON(Greater, a > b)
KILN_DEVICE_COMPARISON(GreaterEqual, a >= b)
KILN_DEVICE_COMPARISON(LogicalAnd, cast_to<bool>(a) && cast_to<bool>(b))
KILN_DEVICE_COMPARISON(LogicalOr, cast_to<bool>(a) || cast_to<bool>(b))
#undef KILN_DEVICE_COMPARISON

/** equal() with equal_nan=true: NaNs compare equal to each other. */
struct NaNEqual {
  template <typename T>
  __device__ bool operator()(T a, T b) const {
    if constexpr (is_float_v<T> || is_complex_v<T>) {
      return a == b || (math::isnan(a) && math::isnan(b));
    } else {
      return a == b;
    }
  }
};

struct BitwiseAnd {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};

struct BitwiseOr {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};

struct BitwiseXor {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};

// Shifts by negative or >= bit-width amounts give NumPy's results instead of
// undefined behaviour.
struct LeftShift {
  template <typename T>
  __device__ T operator()(T a, T b) const {
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
  template <typename T>
  __device__ T operator()(T a, T b) const {
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
  template <typename T>
  __device__ T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};

} // namespace kiln::cuda
