// Sorts along one axis, one block per line with cub::BlockRadixSort over
// unsigned keys whose order is the CPU's (backend/cpu/radix_sort.h): NaNs
// after every number, -0 before +0 for sort and tied with +0 for argsort,
// which is stable (CUB's radix sort is, and each line is loaded in order).
// Lines are numbered as for the scans (device/scan.cuh); the output is
// row-major. Lines longer than the largest tile are sorted in tiles, then
// merged.
// searchsorted's binary search compares the same keys.
#pragma once

#include <cub/block/block_radix_sort.cuh>

#include "kiln/backend/cuda/device/bits.cuh"

namespace kiln::cuda {

/** Radix keys are the unsigned integers of the element's size. */
template <typename T>
using radix_key_t = bits_t<T>;

template <typename T>
inline constexpr bool is_floating_v = is_float_v<T> || is_half_v<T>;

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
  U b = to_bits(v);
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

/** Loads elements [start, start + Threads x Items) of a line as sort keys
 *  with their positions, thread t holding [t * Items, (t + 1) * Items): the
 *  blocked order CUB's stable sort keeps for equal keys. Slots past the
 *  line's end hold the largest key and sort after every element. */
template <typename T, bool TieZeros, int Threads, int Items>
__device__ __forceinline__ void load_keys(const T* x, int64_t start, int64_t n,
                                          int64_t in_stride,
                                          radix_key_t<T> (&keys)[Items],
                                          uint32_t (&index)[Items]) {
  using K = radix_key_t<T>;
#pragma unroll
  for (int i = 0; i < Items; ++i) {
    int64_t j = start + threadIdx.x * Items + i;
    index[i] = static_cast<uint32_t>(j);
    keys[i] = j < n ? radix_key<T, TieZeros>(x[j * in_stride]) : K(~K(0));
  }
}

/** Sorts (Arg: argsorts) lines of up to Threads x Items elements, one block
 *  per line, straight into the output. */
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
    auto* y = out + (line / inner) * n * inner + line % inner;
    K keys[Items];
    uint32_t index[Items];
    load_keys<T, Arg, Threads>(in + off[0], 0, n, in_stride, keys, index);
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

// Lines longer than a tile: sort_runs sorts each tile of each line into
// keys and positions in scratch (lines x n, row-major), merge_runs merges
// pairs of sorted runs of `width` (doubling each pass, ping-ponging between
// two scratch buffers) until one run spans the line, and write_sorted
// writes the result out. Every step is stable.

/** One block per (line, tile). */
template <typename T, bool TieZeros, int Threads, int Items>
__global__ void __launch_bounds__(Threads)
    sort_runs(const T* __restrict__ in, radix_key_t<T>* __restrict__ keys_out,
              uint32_t* __restrict__ index_out, int64_t lines, int64_t n,
              int64_t in_stride, const __grid_constant__ Strided<1> l) {
  using K = radix_key_t<T>;
  using Sorter = cub::BlockRadixSort<K, Threads, Items, uint32_t>;
  constexpr int tile = Threads * Items;
  __shared__ typename Sorter::TempStorage storage;
  int64_t tiles = (n + tile - 1) / tile;
  for (int64_t b = blockIdx.x; b < lines * tiles; b += gridDim.x) {
    int64_t line = b / tiles, start = (b % tiles) * tile;
    int64_t off[1];
    strided_offsets(line, l, off);
    K keys[Items];
    uint32_t index[Items];
    load_keys<T, TieZeros, Threads>(in + off[0], start, n, in_stride, keys,
                                    index);
    Sorter(storage).SortBlockedToStriped(keys, index);
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      int64_t j = start + threadIdx.x + i * Threads;
      if (j < n) {
        keys_out[line * n + j] = keys[i];
        index_out[line * n + j] = index[i];
      }
    }
    __syncthreads(); // `storage` is reused by the next tile
  }
}

/** How many of the sorted keys[0, m) are below k (OrEqual: not above). */
template <bool OrEqual, typename K>
__device__ __forceinline__ int64_t rank_in(const K* keys, int64_t m, K k) {
  int64_t lo = 0, hi = m;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (OrEqual ? !(k < keys[mid]) : keys[mid] < k) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/** One thread per element: its place in the merge of its run with the
 *  neighbouring one is its place in its own run plus the number of the
 *  other run's elements before it; on ties the left run's come first. */
template <typename K>
__global__ void merge_runs(const K* __restrict__ keys,
                           const uint32_t* __restrict__ index,
                           K* __restrict__ keys_out,
                           uint32_t* __restrict__ index_out, int64_t lines,
                           int64_t n, int64_t width) {
  int64_t count = lines * n;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < count; e += step) {
    int64_t line = e / n, i = e % n;
    const K* line_keys = keys + line * n;
    int64_t base = i / (2 * width) * (2 * width);
    int64_t mid = base + width < n ? base + width : n;
    int64_t end = mid + width < n ? mid + width : n;
    K k = keys[e];
    int64_t place =
        i < mid ? (i - base) + rank_in<false>(line_keys + mid, end - mid, k)
                : (i - mid) + rank_in<true>(line_keys + base, mid - base, k);
    keys_out[line * n + base + place] = k;
    index_out[line * n + base + place] = index[e];
  }
}

/** One thread per element, from scratch to the row-major output. */
template <typename T, bool Arg>
__global__ void write_sorted(const radix_key_t<T>* __restrict__ keys,
                             const uint32_t* __restrict__ index,
                             conditional_t<Arg, uint32_t, T>* __restrict__ out,
                             int64_t lines, int64_t n, int64_t inner) {
  int64_t count = lines * n;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < count; e += step) {
    int64_t line = e / n, j = e % n;
    auto* y = out + (line / inner) * n * inner + line % inner;
    if constexpr (Arg) {
      y[j * inner] = index[e];
    } else {
      y[j * inner] = radix_value<T>(keys[e]);
    }
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
