// Sorts along one axis, one block per line with cub::BlockRadixSort over
// unsigned keys whose order is the CPU's (backend/cpu/radix_sort.h): NaNs
// after every number, -0 before +0 for sort and tied with +0 for argsort,
// which is stable (CUB's radix sort is, and each line is loaded in order).
// Lines are numbered as for the scans (device/scan.cuh); the output is
// row-major. A line longer than the largest tile is sorted on the host.
// searchsorted's binary search compares the same keys.
#pragma once

#include <cub/block/block_radix_sort.cuh>

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

template <int Bytes>
struct UintOfSize;
template <>
struct UintOfSize<1> {
  using type = unsigned char;
};
template <>
struct UintOfSize<2> {
  using type = unsigned short;
};
template <>
struct UintOfSize<4> {
  using type = unsigned int;
};
template <>
struct UintOfSize<8> {
  using type = unsigned long long;
};
template <typename T>
using radix_key_t = typename UintOfSize<sizeof(T)>::type;

template <typename T>
inline constexpr bool is_floating_v = is_float_v<T> || is_half_v<T>;

template <typename T>
__device__ __forceinline__ radix_key_t<T> bits_of(T v) {
  if constexpr (is_same_v<T, __half>) {
    return __half_as_ushort(v);
  } else if constexpr (is_same_v<T, __nv_bfloat16>) {
    return __bfloat16_as_ushort(v);
  } else if constexpr (is_same_v<T, float>) {
    return __float_as_uint(v);
  } else if constexpr (is_same_v<T, double>) {
    return static_cast<unsigned long long>(__double_as_longlong(v));
  } else {
    return static_cast<radix_key_t<T>>(v);
  }
}

template <typename T>
__device__ __forceinline__ T from_bits(radix_key_t<T> b) {
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

/** Bits of +infinity; a NaN's magnitude bits are above them. */
template <typename T>
__device__ __forceinline__ radix_key_t<T> infinity_bits() {
  if constexpr (is_same_v<T, __half>) {
    return 0x7c00;
  } else if constexpr (is_same_v<T, __nv_bfloat16>) {
    return 0x7f80;
  } else if constexpr (is_same_v<T, float>) {
    return 0x7f800000u;
  } else {
    return 0x7ff0000000000000ull;
  }
}

/** Order-preserving key: the sign bit flipped for signed integers, all bits
 *  of negative floats flipped (so -0 keys just below +0), and every NaN the
 *  largest key, which no number has. TieZeros gives -0 the key of +0
 *  (argsort's order, where the two are equal). */
template <typename T, bool TieZeros>
__device__ __forceinline__ radix_key_t<T> radix_key(T v) {
  using U = radix_key_t<T>;
  constexpr U sign = U(U(1) << (8 * sizeof(T) - 1));
  U b = bits_of(v);
  if constexpr (is_floating_v<T>) {
    U magnitude = U(b & U(~sign));
    if (magnitude > infinity_bits<T>()) return U(~U(0));
    if (TieZeros && magnitude == 0) return sign;
    return (b & sign) ? U(~b) : U(b | sign);
  } else if constexpr (is_signed_int_v<T>) {
    return U(b ^ sign);
  } else {
    return b;
  }
}

/** The value of a key made without TieZeros (NaN's key gives a NaN). */
template <typename T>
__device__ __forceinline__ T radix_value(radix_key_t<T> k) {
  using U = radix_key_t<T>;
  constexpr U sign = U(U(1) << (8 * sizeof(T) - 1));
  if constexpr (is_floating_v<T>) {
    return from_bits<T>((k & sign) ? U(k & U(~sign)) : U(~k));
  } else if constexpr (is_signed_int_v<T>) {
    return from_bits<T>(U(k ^ sign));
  } else {
    return from_bits<T>(k);
  }
}

/** Sorts (Arg: argsorts) lines of up to Threads x Items elements, one block
 *  per line. Thread t holds elements [t * Items, (t + 1) * Items) of the
 *  line, the blocked order CUB's stable sort keeps for equal keys; slots
 *  past the line's end hold the largest key and sort after it. */
template <typename T, bool Arg, int Threads, int Items>
__global__ void __launch_bounds__(Threads)
    sort_lines(const T* __restrict__ in,
               conditional_t<Arg, uint32_t, T>* __restrict__ out, int64_t lines,
               int64_t n, int64_t inner, int64_t in_stride,
               const __grid_constant__ Strided<1> l) {
  using K = radix_key_t<T>;
  using Payload = conditional_t<Arg, uint32_t, cub::NullType>;
  using Sorter = cub::BlockRadixSort<K, Threads, Items, Payload>;
  __shared__ typename Sorter::TempStorage storage;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    int64_t off[1];
    strided_offsets(line, l, off);
    const T* x = in + off[0];
    auto* y = out + (line / inner) * n * inner + line % inner;
    K keys[Items];
    uint32_t index[Items];
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      int j = threadIdx.x * Items + i;
      index[i] = j;
      keys[i] = j < n ? radix_key<T, Arg>(x[j * in_stride]) : K(~K(0));
    }
    // Sorted element j ends in thread j % Threads, slot j / Threads, so the
    // stores of a contiguous line are coalesced.
    if constexpr (Arg) {
      Sorter(storage).SortBlockedToStriped(keys, index);
    } else {
      Sorter(storage).SortBlockedToStriped(keys);
    }
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      int64_t j = threadIdx.x + i * Threads;
      if (j < n) {
        if constexpr (Arg) {
          y[j * inner] = index[i];
        } else {
          y[j * inner] = radix_value<T>(keys[i]);
        }
      }
    }
    __syncthreads(); // `storage` is reused by the next line
  }
}

/** For each value (operand 0 of l; operand 1 is the row-major output), the
 *  number of elements of the sorted sequence before it: strictly less
 *  (right: less or equal) in the NaN-last order, where -0 equals +0 and
 *  NaNs equal each other, so the argsort keys compare exactly so. */
template <typename T>
__global__ void search_sorted(const T* __restrict__ seq, int64_t n,
                              int64_t seq_stride, const T* __restrict__ values,
                              uint32_t* __restrict__ out, int64_t count,
                              bool right,
                              const __grid_constant__ Strided<2> l) {
  using K = radix_key_t<T>;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += step) {
    int64_t off[2];
    strided_offsets(i, l, off);
    K x = radix_key<T, true>(values[off[0]]);
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      K e = radix_key<T, true>(seq[mid * seq_stride]);
      if (right ? !(x < e) : e < x) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    out[off[1]] = static_cast<uint32_t>(lo);
  }
}

} // namespace kiln::cuda
