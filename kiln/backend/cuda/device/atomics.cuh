// Atomic read-modify-write of one element of any kernel dtype with any
// combining functor. Native atomics serve the cases whose result equals the
// functor's (integer and float32/float64 sums, integer max/min); everything
// else (16-bit floats, 8- and 16-bit integers, products, float max/min with
// NaN) loops on compare-and-swap over the element's bits, so the stored value
// is exactly Op(old, value) as on the CPU, in some order of the updates.
#pragma once

#include "kiln/backend/cuda/device/bits.cuh"

namespace kiln::cuda {

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
