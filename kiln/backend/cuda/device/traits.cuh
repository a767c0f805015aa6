// The few type traits and math functions the device code needs, written out
// instead of taken from libcu++: its headers cost NVRTC seconds per kernel,
// and every JIT compile parses what the device headers include. Math calls
// go to CUDA's own functions (expf for float, exp for double), which NVRTC
// knows without any header.
#pragma once

// Fixed-width integers: NVRTC has no <cstdint>.
#ifdef __CUDACC_RTC__
using int8_t = signed char;
using int16_t = short;
using int32_t = int;
using int64_t = long long;
using uint8_t = unsigned char;
using uint16_t = unsigned short;
using uint32_t = unsigned int;
using uint64_t = unsigned long long;
using uintptr_t = unsigned long long;
#else
#include <cstdint>
#endif

#include "kiln/backend/common/libm_table.h"

namespace kiln::cuda {

template <typename A, typename B>
inline constexpr bool is_same_v = false;
template <typename A>
inline constexpr bool is_same_v<A, A> = true;

template <bool B, typename T, typename F>
struct Conditional {
  using type = T;
};
template <typename T, typename F>
struct Conditional<false, T, F> {
  using type = F;
};
template <bool B, typename T, typename F>
using conditional_t = typename Conditional<B, T, F>::type;

template <typename T>
inline constexpr bool is_float_v = is_same_v<T, float> || is_same_v<T, double>;

template <typename T>
inline constexpr bool is_signed_int_v =
    is_same_v<T, signed char> || is_same_v<T, short> || is_same_v<T, int> ||
    is_same_v<T, long> || is_same_v<T, long long>;

template <typename T>
inline constexpr bool is_unsigned_v =
    is_same_v<T, bool> || is_same_v<T, unsigned char> ||
    is_same_v<T, unsigned short> || is_same_v<T, unsigned int> ||
    is_same_v<T, unsigned long> || is_same_v<T, unsigned long long>;

template <typename T>
inline constexpr bool is_integral_v = is_signed_int_v<T> || is_unsigned_v<T>;

template <typename T>
inline constexpr bool is_signed_v = is_float_v<T> || is_signed_int_v<T>;

template <typename T>
struct MakeUnsigned {
  using type = T;
};
template <>
struct MakeUnsigned<signed char> {
  using type = unsigned char;
};
template <>
struct MakeUnsigned<short> {
  using type = unsigned short;
};
template <>
struct MakeUnsigned<int> {
  using type = unsigned int;
};
template <>
struct MakeUnsigned<long> {
  using type = unsigned long;
};
template <>
struct MakeUnsigned<long long> {
  using type = unsigned long long;
};
template <typename T>
using make_unsigned_t = typename MakeUnsigned<T>::type;

namespace math {

// One overload per precision for each function of the libm table, mapping
// to CUDA's float and double functions (expf and exp).
#define KILN_MATH_1(name, cuda)                                           \
  __device__ __forceinline__ float name(float x) { return ::cuda##f(x); } \
  __device__ __forceinline__ double name(double x) { return ::cuda(x); }
#define KILN_MATH_2(name, cuda)                                           \
  __device__ __forceinline__ float name(float a, float b) {               \
    return ::cuda##f(a, b);                                               \
  }                                                                       \
  __device__ __forceinline__ double name(double a, double b) {            \
    return ::cuda(a, b);                                                  \
  }
#define KILN_MATH(name, arity, cuda) KILN_MATH_##arity(name, cuda)
KILN_LIBM_FUNCTIONS(KILN_MATH)
KILN_MATH_1(abs, fabs)
#undef KILN_MATH
#undef KILN_MATH_1
#undef KILN_MATH_2

template <typename T>
__device__ __forceinline__ bool isnan(T x) {
  return x != x;
}
template <typename T>
__device__ __forceinline__ bool isinf(T x) {
  return x == x && x - x != x - x;
}
template <typename T>
__device__ __forceinline__ T quiet_nan() {
  if constexpr (is_same_v<T, float>) {
    return __int_as_float(0x7fc00000);
  } else {
    return __longlong_as_double(0x7ff8000000000000ll);
  }
}
template <typename T>
__device__ __forceinline__ T infinity() {
  if constexpr (is_same_v<T, float>) {
    return __int_as_float(0x7f800000);
  } else {
    return __longlong_as_double(0x7ff0000000000000ll);
  }
}

} // namespace math

/** The smallest and largest values of T (infinities for the compute floats
 *  float and double): the identities of max and min. */
template <typename T>
__device__ __forceinline__ T lowest_value() {
  if constexpr (is_float_v<T>) {
    return -math::infinity<T>();
  } else if constexpr (is_same_v<T, bool>) {
    return false;
  } else if constexpr (is_signed_int_v<T>) {
    return static_cast<T>(static_cast<make_unsigned_t<T>>(1)
                          << (sizeof(T) * 8 - 1));
  } else {
    return T(0);
  }
}

template <typename T>
__device__ __forceinline__ T highest_value() {
  if constexpr (is_float_v<T>) {
    return math::infinity<T>();
  } else if constexpr (is_same_v<T, bool>) {
    return true;
  } else {
    // ~lowest: all ones for unsigned types, the largest for signed ones.
    return static_cast<T>(~lowest_value<T>());
  }
}

} // namespace kiln::cuda
