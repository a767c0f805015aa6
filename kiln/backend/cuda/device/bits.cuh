// An element's bits as the unsigned integer of its size, and back: what
// compare-and-swap loops swap and radix sorts order.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

/** The unsigned integer of T's size, and T's bits as one. */
template <int Size>
struct BitsOf;
template <>
struct BitsOf<1> {
  using type = unsigned char;
};
template <>
struct BitsOf<2> {
  using type = unsigned short;
};
template <>
struct BitsOf<4> {
  using type = unsigned int;
};
template <>
struct BitsOf<8> {
  using type = unsigned long long;
};
template <typename T>
using bits_t = typename BitsOf<sizeof(T)>::type;

template <typename T>
__device__ __forceinline__ bits_t<T> to_bits(T v) {
  if constexpr (is_same_v<T, __half>) {
    return __half_as_ushort(v);
  } else if constexpr (is_same_v<T, __nv_bfloat16>) {
    return __bfloat16_as_ushort(v);
  } else if constexpr (is_same_v<T, float>) {
    return __float_as_uint(v);
  } else if constexpr (is_same_v<T, double>) {
    return static_cast<unsigned long long>(__double_as_longlong(v));
  } else if constexpr (is_complex_v<T>) {
    // The parts as laid out in memory: real in the low word.
    return static_cast<unsigned long long>(__float_as_uint(v.im)) << 32 |
           __float_as_uint(v.re);
  } else {
    return static_cast<bits_t<T>>(v); // integers and bool
  }
}

template <typename T>
__device__ __forceinline__ T from_bits(bits_t<T> b) {
  if constexpr (is_same_v<T, __half>) {
    return __ushort_as_half(b);
  } else if constexpr (is_same_v<T, __nv_bfloat16>) {
    return __ushort_as_bfloat16(b);
  } else if constexpr (is_same_v<T, float>) {
    return __uint_as_float(b);
  } else if constexpr (is_same_v<T, double>) {
    return __longlong_as_double(static_cast<long long>(b));
  } else if constexpr (is_complex_v<T>) {
    return T(__uint_as_float(static_cast<unsigned int>(b)),
             __uint_as_float(static_cast<unsigned int>(b >> 32)));
  } else if constexpr (is_same_v<T, bool>) {
    return b != 0;
  } else {
    return static_cast<T>(b);
  }
}

} // namespace kiln::cuda
