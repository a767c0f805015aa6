// Atomic read-modify-write of one element of any kernel dtype with any
// combining functor. Native atomics serve the cases whose result equals the
// functor's (integer and float32/float64 sums, integer max/min); everything
// else (16-bit floats, 8- and 16-bit integers, products, float max/min with
// NaN) loops on compare-and-swap over the element's bits, so the stored value
// is exactly Op(old, value) as on the CPU, in some order of the updates.
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
  } else if constexpr (is_same_v<T, bool>) {
    return b != 0;
  } else {
    return static_cast<T>(b);
  }
}

/** *addr = Op{}(*addr, v) by compare-and-swap. 8- and 16-bit elements swap
 *  the aligned 32-bit word holding them (their neighbours are left as
 *  found: a failed swap just retries). Bits are compared, not values, so a
 *  NaN cannot make the loop spin. */
template <typename Op, typename T>
__device__ __forceinline__ void atomic_update_cas(T* addr, T v) {
  if constexpr (sizeof(T) >= 4) {
    using U = bits_t<T>;
    U* p = reinterpret_cast<U*>(addr);
    U old = *p, assumed;
    do {
      assumed = old;
      U next = to_bits(Op{}(from_bits<T>(assumed), v));
      old = atomicCAS(p, assumed, next);
    } while (old != assumed);
  } else {
    auto a = reinterpret_cast<uintptr_t>(addr);
    unsigned int* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
    unsigned int shift = static_cast<unsigned int>(a & 3) * 8;
    unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      T cur = from_bits<T>(static_cast<bits_t<T>>((assumed & mask) >> shift));
      unsigned int b = static_cast<unsigned int>(to_bits(Op{}(cur, v)));
      old = atomicCAS(word, assumed, (assumed & ~mask) | ((b << shift) & mask));
    } while (old != assumed);
  }
}

} // namespace kiln::cuda
