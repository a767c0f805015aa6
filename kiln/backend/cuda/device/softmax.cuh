// Softmax over the last axis of a row-major array, with the CPU's rounding
// points (backend/cpu/softmax.cpp): the row max in the compute type C (a
// NaN wins), each exp(x - max) rounded to Acc and summed in Acc (T itself
// for imprecise float16/bfloat16, else C), then exp * (1 / sum) rounded to
// T. An all -inf row gives NaN, as exp(-inf - -inf) does on the CPU.
//   softmax_warp: one warp per row, the row held in registers (rows of at
//     most 32 * N * K elements).
//   softmax_block: one block per row for longer rows, three passes over the
//     row (max, sum, write); the re-reads mostly hit L2.
// logsumexp_warp / logsumexp_block do the first two passes of the same
// shapes (one warp or one block per row) in the compute type and write
// log(sum) + shift per row, as backend/cpu/softmax.cpp: the shift is the row
// max, or 0 when that is infinite.
#pragma once

#include "kiln/backend/cuda/device/rows.cuh"

namespace kiln::cuda {

/** exp(v - m) rounded to Acc, back in the compute type. */
template <typename Acc, typename C>
__device__ __forceinline__ C softmax_exp(C v, C m) {
  return cast_to<C>(cast_to<Acc>(math::exp(v - m)));
}

template <typename T, typename Acc, int N, int K>
__global__ void softmax_warp(const T* __restrict__ x, T* __restrict__ out,
                             int64_t rows, int64_t n) {
  using C = compute_t<T>;
  int lane = threadIdx.x % warp_size;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_step()) {
    C v[K][N];
    load_warp_row(x + r * n, n, lane, -math::infinity<C>(), v);
    C m = -math::infinity<C>();
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < N; ++j) m = MaxNaN{}(m, v[k][j]);
    }
    m = warp_reduce(m, MaxNaN{});
    Acc s = cast_to<Acc>(C(0));
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t i = warp_chunk(k, lane, N);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        if (i + j < n) {
          v[k][j] = softmax_exp<Acc>(v[k][j], m);
          s = SumRounded{}(s, cast_to<Acc>(v[k][j]));
        }
      }
    }
    s = warp_reduce(s, SumRounded{});
    C inv = C(1) / cast_to<C>(s);
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < N; ++j) v[k][j] *= inv;
    }
    store_warp_row(out + r * n, n, lane, v);
  }
}

template <typename T, typename Acc, int N>
__global__ void __launch_bounds__(max_row_block)
    softmax_block(const T* __restrict__ x, T* __restrict__ out, int64_t rows,
                  int64_t n) {
  using C = compute_t<T>;
  int64_t first = static_cast<int64_t>(threadIdx.x) * N;
  int64_t step = static_cast<int64_t>(blockDim.x) * N;
  // r depends on the block only: every thread reaches each block_reduce.
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* orow = out + r * n;
    bool in_aligned = is_aligned<T, N>(xr),
         out_aligned = is_aligned<T, N>(orow);
    C m = -math::infinity<C>();
    for (int64_t i = first; i < n; i += step) {
      C v[N];
      load_chunk<N>(xr, i, n, in_aligned, -math::infinity<C>(), v);
#pragma unroll
      for (int j = 0; j < N; ++j) m = MaxNaN{}(m, v[j]);
    }
    m = block_reduce(m, MaxNaN{}, reduce_scratch<C>());
    Acc s = cast_to<Acc>(C(0));
    for (int64_t i = first; i < n; i += step) {
      C v[N];
      load_chunk<N>(xr, i, n, in_aligned, C(0), v);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        if (i + j < n) {
          s = SumRounded{}(s, cast_to<Acc>(softmax_exp<Acc>(v[j], m)));
        }
      }
    }
    s = block_reduce(s, SumRounded{}, reduce_scratch<Acc>());
    C inv = C(1) / cast_to<C>(s);
    for (int64_t i = first; i < n; i += step) {
      C v[N];
      load_chunk<N>(xr, i, n, in_aligned, C(0), v);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = softmax_exp<Acc>(v[j], m) * inv;
      store_chunk<N>(orow, i, n, out_aligned, v);
    }
  }
}

/** Combine a value over the warp, or over the block (every thread of the
 *  block must call it). */
struct WarpReducer {
  template <typename T, typename Op>
  __device__ __forceinline__ T operator()(T v, Op op) const {
    return warp_reduce(v, op);
  }
};
struct BlockReducer {
  template <typename T, typename Op>
  __device__ __forceinline__ T operator()(T v, Op op) const {
    return block_reduce(v, op, reduce_scratch<T>());
  }
};

/** A row's logsumexp from the threads' part of it: elements [first, n) in
 *  steps of `step`, chunk by chunk; reduce(v, op) combines the threads'
 *  values (a warp's or a block's). Every thread gets the result. */
template <typename T, int N, typename Reduce>
__device__ __forceinline__ compute_t<T> row_logsumexp(const T* xr, int64_t n,
                                                      int64_t first,
                                                      int64_t step,
                                                      Reduce reduce) {
  using C = compute_t<T>;
  bool aligned = is_aligned<T, N>(xr);
  C m = -math::infinity<C>();
  for (int64_t i = first; i < n; i += step) {
    C v[N];
    load_chunk<N>(xr, i, n, aligned, -math::infinity<C>(), v);
#pragma unroll
    for (int j = 0; j < N; ++j) m = MaxNaN{}(m, v[j]);
  }
  m = reduce(m, MaxNaN{});
  C shift = math::isinf(m) ? C(0) : m;
  C s = C(0);
  for (int64_t i = first; i < n; i += step) {
    C v[N];
    // Past the end: -inf, whose exp adds nothing.
    load_chunk<N>(xr, i, n, aligned, -math::infinity<C>(), v);
#pragma unroll
    for (int j = 0; j < N; ++j) s += math::exp(v[j] - shift);
  }
  s = reduce(s, SumRounded{}); // C is float or double: a plain sum
  return math::log(s) + shift;
}

template <typename T, int N>
__global__ void logsumexp_warp(const T* __restrict__ x, T* __restrict__ out,
                               int64_t rows, int64_t n) {
  int lane = threadIdx.x % warp_size;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_step()) {
    auto l = row_logsumexp<T, N>(x + r * n, n, int64_t(lane) * N,
                                 int64_t(warp_size) * N, WarpReducer{});
    if (lane == 0) out[r] = cast_to<T>(l);
  }
}

template <typename T, int N>
__global__ void __launch_bounds__(max_row_block)
    logsumexp_block(const T* __restrict__ x, T* __restrict__ out, int64_t rows,
                    int64_t n) {
  // r depends on the block only: every thread reaches each block_reduce.
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    auto l = row_logsumexp<T, N>(x + r * n, n, int64_t(threadIdx.x) * N,
                                 int64_t(blockDim.x) * N, BlockReducer{});
    if (threadIdx.x == 0) out[r] = cast_to<T>(l);
  }
}

} // namespace kiln::cuda
