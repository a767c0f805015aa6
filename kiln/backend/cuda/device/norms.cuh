// LayerNorm and RMSNorm over the last axis of a row-major array, with the
// CPU's rounding points (backend/cpu/norms.cpp): row statistics accumulate
// in double, two-pass (the mean, then the squared deviations from it; in
// float they lose digits to cancellation on short rows of close values);
// mu and 1 / sqrt(var + eps) are rounded to the compute type C, and each
// element is ((x - mu) * inv * w + b) in C, rounded once to T. RMSNorm is the
// same with mu = 0 and no bias. Weight and bias are read with a stride (0 for
// the 0-d stand-in of an absent one).
//   norm_warp: one warp per row, the row held in registers (rows of at
//     most 32 * N * K elements).
//   norm_block: one block per row for longer rows, re-reading the row for
//     each pass.
#pragma once

#include "kiln/backend/cuda/device/rows.cuh"

namespace kiln::cuda {

/** The per-row constants every element uses. */
template <typename C>
struct NormRow {
  C mu;
  C inv;
};

template <typename C, typename Acc>
__device__ __forceinline__ NormRow<C> norm_row(Acc mean, Acc ss, int64_t n,
                                               float eps) {
  Acc var = ss / static_cast<Acc>(n) + static_cast<Acc>(eps);
  return {static_cast<C>(mean), static_cast<C>(Acc(1) / math::sqrt(var))};
}

template <bool Rms, typename T, typename C>
__device__ __forceinline__ C normalize(C x, NormRow<C> row, const T* w,
                                       const T* b, int64_t j, int64_t sw,
                                       int64_t sb) {
  C y = (x - row.mu) * row.inv * cast_to<C>(w[j * sw]);
  if constexpr (!Rms) y += cast_to<C>(b[j * sb]);
  return y;
}

/** b is unused (may be null) when Rms. */
template <typename T, int N, int K, bool Rms>
__global__ void norm_warp(const T* __restrict__ x, const T* __restrict__ w,
                          const T* __restrict__ b, T* __restrict__ out,
                          int64_t rows, int64_t n, int64_t sw, int64_t sb,
                          float eps) {
  using C = compute_t<T>;
  using Acc = double; // the statistics, as on the CPU
  int lane = threadIdx.x % warp_size;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_step()) {
    const T* xr = x + r * n;
    T* orow = out + r * n;
    bool in_aligned = is_aligned<T, N>(xr),
         out_aligned = is_aligned<T, N>(orow);
    C v[K][N];
    Acc sum = 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      load_chunk<N>(xr, warp_chunk(k, lane, N), n, in_aligned, C(0), v[k]);
#pragma unroll
      for (int j = 0; j < N; ++j) sum += static_cast<Acc>(v[k][j]);
    }
    Acc mean = 0;
    if constexpr (!Rms) mean = warp_reduce(sum, SumRounded{}) / Acc(n);
    Acc ss = 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t i = warp_chunk(k, lane, N);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        Acc d = static_cast<Acc>(v[k][j]) - mean;
        if (i + j < n) ss += d * d;
      }
    }
    ss = warp_reduce(ss, SumRounded{});
    NormRow<C> row = norm_row<C>(mean, ss, n, eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t i = warp_chunk(k, lane, N);
      C y[N];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        y[j] = i + j < n ? normalize<Rms>(v[k][j], row, w, b, i + j, sw, sb)
                         : C(0);
      }
      store_chunk<N>(orow, i, n, out_aligned, y);
    }
  }
}

template <typename T, int N, bool Rms>
__global__ void __launch_bounds__(max_row_block)
    norm_block(const T* __restrict__ x, const T* __restrict__ w,
               const T* __restrict__ b, T* __restrict__ out, int64_t rows,
               int64_t n, int64_t sw, int64_t sb, float eps) {
  using C = compute_t<T>;
  using Acc = double; // the statistics, as on the CPU
  Acc* scratch = reduce_scratch<Acc>();
  int64_t first = static_cast<int64_t>(threadIdx.x) * N;
  int64_t step = static_cast<int64_t>(blockDim.x) * N;
  // r depends on the block only: every thread reaches each block_reduce.
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* orow = out + r * n;
    bool in_aligned = is_aligned<T, N>(xr),
         out_aligned = is_aligned<T, N>(orow);
    Acc mean = 0;
    if constexpr (!Rms) {
      Acc sum = 0;
      for (int64_t i = first; i < n; i += step) {
        C v[N];
        load_chunk<N>(xr, i, n, in_aligned, C(0), v);
#pragma unroll
        for (int j = 0; j < N; ++j) sum += static_cast<Acc>(v[j]);
      }
      mean = block_reduce(sum, SumRounded{}, scratch) / Acc(n);
    }
    Acc ss = 0;
    for (int64_t i = first; i < n; i += step) {
      C v[N];
      load_chunk<N>(xr, i, n, in_aligned, C(0), v);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        Acc d = static_cast<Acc>(v[j]) - mean;
        if (i + j < n) ss += d * d;
      }
    }
    ss = block_reduce(ss, SumRounded{}, scratch);
    NormRow<C> row = norm_row<C>(mean, ss, n, eps);
    for (int64_t i = first; i < n; i += step) {
      C v[N];
      load_chunk<N>(xr, i, n, in_aligned, C(0), v);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[j] =
            i + j < n ? normalize<Rms>(v[j], row, w, b, i + j, sw, sb) : C(0);
      }
      store_chunk<N>(orow, i, n, out_aligned, v);
    }
  }
}

} // namespace kiln::cuda
