// What the row kernels (softmax, norms) share: reductions over a warp or a
// block, and reading/writing a row in 16-byte chunks. A row is split into
// chunks of N elements (16 bytes of T); chunk c covers [c * N, c * N + N).
// Rows are row-major, so a row is contiguous but its start is 16-byte
// aligned only when the array's is and the row length allows it: each row
// checks, and unaligned rows (and the tail) go element by element.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

inline constexpr int warp_size = 32;
/** Threads of a block-per-row kernel at most (row_kernels.h launches up to
 *  this many); __launch_bounds__ keeps their registers within reach. */
inline constexpr int max_row_block = 1024;

/** The row max as the CPU takes it: a NaN anywhere wins. */
struct MaxNaN {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};

/** a + b computed in the compute type and rounded to T (16-bit sums round
 *  after every addition, as the CPU's do). */
struct SumRounded {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return cast_to<T>(cast_to<compute_t<T>>(a) + cast_to<compute_t<T>>(b));
  }
};

/** Every lane of a full warp gets op over the warp's 32 values. */
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = warp_size / 2; o > 0; o /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

/** Every thread gets op over the block's values. blockDim.x is a multiple
 *  of 32 (at most 1024); scratch holds 32 values of T. Synchronizes the
 *  block, so every thread must call it. */
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T* scratch) {
  int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  v = warp_reduce(v, op);
  __syncthreads(); // the previous reduction's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  // Each thread folds the warps' results in the same order: all agree.
  v = scratch[0];
  int warps = blockDim.x / warp_size;
  for (int w = 1; w < warps; ++w) v = op(v, scratch[w]);
  return v;
}

/** Shared scratch for block_reduce of any element type up to 8 bytes
 *  (raw storage: __half has no trivial constructor in every toolkit); one
 *  array per block, reused by consecutive reductions. */
__device__ __forceinline__ double* reduce_storage() {
  __shared__ double scratch[warp_size];
  return scratch;
}
template <typename T>
__device__ __forceinline__ T* reduce_scratch() {
  static_assert(sizeof(T) <= sizeof(double), "scratch holds 8-byte values");
  return reinterpret_cast<T*>(reduce_storage());
}

/** The N elements of row at [i, i + N) in compute type C; `fill` past n. */
template <int N, typename T, typename C>
__device__ __forceinline__ void load_chunk(const T* row, int64_t i, int64_t n,
                                           bool aligned, C fill, C (&out)[N]) {
  if (aligned && i + N <= n) {
    auto v = *reinterpret_cast<const Vec<T, N>*>(row + i);
#pragma unroll
    for (int j = 0; j < N; ++j) out[j] = cast_to<C>(v.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      out[j] = i + j < n ? cast_to<C>(row[i + j]) : fill;
    }
  }
}

/** Rounds y to T and stores the part of [i, i + N) below n. */
template <int N, typename T, typename C>
__device__ __forceinline__ void store_chunk(T* row, int64_t i, int64_t n,
                                            bool aligned, const C (&y)[N]) {
  if (aligned && i + N <= n) {
    Vec<T, N> v;
#pragma unroll
    for (int j = 0; j < N; ++j) v.v[j] = cast_to<T>(y[j]);
    *reinterpret_cast<Vec<T, N>*>(row + i) = v;
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (i + j < n) row[i + j] = cast_to<T>(y[j]);
    }
  }
}

/** Rows handled by warps: the first row of this thread's warp and the
 *  stride between a warp's rows (grid-stride, so any grid covers any
 *  number of rows). */
__device__ __forceinline__ int64_t first_warp_row() {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) /
         warp_size;
}
__device__ __forceinline__ int64_t warp_row_step() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x / warp_size;
}

/** Start of lane's k-th chunk when a warp holds a row in registers. */
__device__ __forceinline__ int64_t warp_chunk(int k, int lane, int n_per) {
  return (static_cast<int64_t>(k) * warp_size + lane) * n_per;
}

/** A row held by a warp: lane's K chunks of N elements of row (n elements)
 *  in compute type C, `fill` past n. */
template <int N, int K, typename T, typename C>
__device__ __forceinline__ void load_warp_row(const T* row, int64_t n,
                                              int lane, C fill,
                                              C (&v)[K][N]) {
  bool aligned = is_aligned<T, N>(row);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    load_chunk<N>(row, warp_chunk(k, lane, N), n, aligned, fill, v[k]);
  }
}

/** Rounds a warp's row (as load_warp_row holds it) to T and stores it. */
template <int N, int K, typename T, typename C>
__device__ __forceinline__ void store_warp_row(T* row, int64_t n, int lane,
                                               const C (&y)[K][N]) {
  bool aligned = is_aligned<T, N>(row);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    store_chunk<N>(row, warp_chunk(k, lane, N), n, aligned, y[k]);
  }
}

} // namespace kiln::cuda
