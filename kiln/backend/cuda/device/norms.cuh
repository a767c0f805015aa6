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
// The fused backwards (NormVjp) take the same shapes with the CPU's
// rounding points too: the statistics as the forward's, rounded to C; the
// row sums of gw = g * w and gw * xhat and each element's
// rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) in double, rounded once
// to T (RMSNorm without the mean(gw) term). dweight = sum over rows of
// g * xhat accumulates in double per column, deterministically: each block
// sums its rows into its own row of a (blocks, n) scratch of partials, and
// norm_vjp_dweight sums the partials in block order.
//   norm_vjp_warp: one warp per row, the row of x and g in registers; each
//     lane keeps its columns' dweight sums in registers across its rows,
//     and the block folds its warps' sums through shared memory.
//   norm_vjp_block: one block per row, each thread adding its columns of a
//     row into the block's partial row (its own entries: no races).
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

/** The statistics of a row a warp holds in registers (lane's k-th chunk
 *  v[k], zeros past n), two-pass in double; every lane gets them. */
template <bool Rms, typename C, int N, int K>
__device__ __forceinline__ NormRow<C> warp_norm_row(const C (&v)[K][N],
                                                    int lane, int64_t n,
                                                    float eps) {
  using Acc = double; // the statistics, as on the CPU
  Acc mean = 0;
  if constexpr (!Rms) {
    Acc sum = 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < N; ++j) sum += static_cast<Acc>(v[k][j]);
    }
    mean = warp_reduce(sum, SumRounded{}) / Acc(n);
  }
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
  return norm_row<C>(mean, ss, n, eps);
}

/** The statistics of row xr read by a block (thread t's chunks at t * N,
 *  stepping blockDim.x * N), two-pass in double; every thread gets them.
 *  Synchronizes the block: every thread must call it. */
template <bool Rms, int N, typename T>
__device__ __forceinline__ NormRow<compute_t<T>> block_norm_row(
    const T* xr, int64_t n, bool aligned, float eps, double* scratch) {
  using C = compute_t<T>;
  using Acc = double; // the statistics, as on the CPU
  int64_t first = static_cast<int64_t>(threadIdx.x) * N;
  int64_t step = static_cast<int64_t>(blockDim.x) * N;
  Acc mean = 0;
  if constexpr (!Rms) {
    Acc sum = 0;
    for (int64_t i = first; i < n; i += step) {
      C v[N];
      load_chunk<N>(xr, i, n, aligned, C(0), v);
#pragma unroll
      for (int j = 0; j < N; ++j) sum += static_cast<Acc>(v[j]);
    }
    mean = block_reduce(sum, SumRounded{}, scratch) / Acc(n);
  }
  Acc ss = 0;
  for (int64_t i = first; i < n; i += step) {
    C v[N];
    load_chunk<N>(xr, i, n, aligned, C(0), v);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      Acc d = static_cast<Acc>(v[j]) - mean;
      if (i + j < n) ss += d * d;
    }
  }
  ss = block_reduce(ss, SumRounded{}, scratch);
  return norm_row<C>(mean, ss, n, eps);
}

template <bool Rms, typename T, typename C>
__device__ __forceinline__ C normalize(C x, NormRow<C> row, const T* w,
                                       const T* b, int64_t j, int64_t sw,
                                       int64_t sb) {
  C y = (x - row.mu) * row.inv * cast_to<C>(w[j * sw]);
  if constexpr (!Rms) y += cast_to<C>(b[j * sb]);
  return y;
}

/** Threads per block of norm_warp (row_kernels.cpp launches every warp
 *  kernel so) and the blocks per SM it is built for: held to 80 registers
 *  (4 bytes spilled for LayerNorm), three blocks per SM. Unbounded it took
 *  160 and ran one block per SM, 8 warps, each walking 8 of a GPT step's
 *  rows one after another: 19.6 us for 8192 rows of 512 bfloat16 (16 MiB
 *  moved, 4 us at the copy rate); 13.4 us so. */
inline constexpr int norm_warp_block = 256;
inline constexpr int norm_warp_min_blocks = 3;

/** b is unused (may be null) when Rms. */
template <typename T, int N, int K, bool Rms>
__global__ void __launch_bounds__(norm_warp_block, norm_warp_min_blocks)
    norm_warp(const T* __restrict__ x, const T* __restrict__ w,
              const T* __restrict__ b, T* __restrict__ out, int64_t rows,
              int64_t n, int64_t sw, int64_t sb, float eps) {
  using C = compute_t<T>;
  int lane = threadIdx.x % warp_size;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_step()) {
    C v[K][N];
    load_warp_row(x + r * n, n, lane, C(0), v);
    NormRow<C> row = warp_norm_row<Rms>(v, lane, n, eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t i = warp_chunk(k, lane, N);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[k][j] = i + j < n ? normalize<Rms>(v[k][j], row, w, b, i + j, sw,
                                             sb)
                            : C(0);
      }
    }
    store_warp_row(out + r * n, n, lane, v);
  }
}

template <typename T, int N, bool Rms>
__global__ void __launch_bounds__(max_row_block)
    norm_block(const T* __restrict__ x, const T* __restrict__ w,
               const T* __restrict__ b, T* __restrict__ out, int64_t rows,
               int64_t n, int64_t sw, int64_t sb, float eps) {
  using C = compute_t<T>;
  double* scratch = reduce_scratch<double>();
  int64_t first = static_cast<int64_t>(threadIdx.x) * N;
  int64_t step = static_cast<int64_t>(blockDim.x) * N;
  // r depends on the block only: every thread reaches each block_reduce.
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* orow = out + r * n;
    bool in_aligned = is_aligned<T, N>(xr),
         out_aligned = is_aligned<T, N>(orow);
    NormRow<C> row = block_norm_row<Rms, N>(xr, n, in_aligned, eps, scratch);
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

// ---- The fused backward (NormVjp) -------------------------------------------

/** Threads of a norm_vjp_warp block (row_kernels.cpp launches this many):
 *  its warps' dweight sums meet in shared memory sized for them. */
inline constexpr int norm_vjp_warp_block = 256;

/** The per-row constants of the backward, in double as on the CPU. */
struct NormVjpRow {
  double mu, rstd, mean_gw, mean_gw_xhat;
};

template <typename C>
__device__ __forceinline__ double norm_xhat(C x, const NormVjpRow& row) {
  return (static_cast<double>(x) - row.mu) * row.rstd;
}

/** g * w at column j, in double. */
template <typename C, typename T>
__device__ __forceinline__ double norm_gw(C g, const T* w, int64_t j,
                                          int64_t sw) {
  return static_cast<double>(g) * cast_to<double>(w[j * sw]);
}

/** dx of one element, rounded to C as the CPU does before T. */
template <typename C>
__device__ __forceinline__ C norm_dx(double gw, double xhat,
                                     const NormVjpRow& row) {
  return static_cast<C>(row.rstd *
                        (gw - row.mean_gw - xhat * row.mean_gw_xhat));
}

/** Inputs row-major (rows, n): x and the cotangent g; w read with stride sw
 *  (0 for a 0-d weight). Writes dx (rows, n) and this block's row of
 *  partial (gridDim.x, n): the sum of g * xhat over the block's rows. */
template <typename T, int N, int K, bool Rms>
__global__ void __launch_bounds__(norm_vjp_warp_block, 2)
    norm_vjp_warp(const T* __restrict__ x, const T* __restrict__ w,
                  const T* __restrict__ g, T* __restrict__ dx,
                  double* __restrict__ partial, int64_t rows, int64_t n,
                  int64_t sw, float eps) {
  using C = compute_t<T>;
  constexpr int warps = norm_vjp_warp_block / warp_size;
  constexpr int row_max = warp_size * N * K;
  __shared__ double warp_dw[warps][row_max];
  int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  // A lane's few rows sum in C (float for the 16-bit types), which keeps the
  // kernel within 128 registers (two blocks per SM); the warps and blocks
  // then add in double.
  C dw[K][N];
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < N; ++j) dw[k][j] = 0;
  }
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_step()) {
    T* dxr = dx + r * n;
    bool dx_aligned = is_aligned<T, N>(dxr);
    C xv[K][N], gv[K][N];
    load_warp_row(x + r * n, n, lane, C(0), xv);
    load_warp_row(g + r * n, n, lane, C(0), gv);
    NormRow<C> stats = warp_norm_row<Rms>(xv, lane, n, eps);
    NormVjpRow row{static_cast<double>(stats.mu),
                   static_cast<double>(stats.inv), 0, 0};
    // gw is recomputed for dx below rather than held: fewer registers.
    double sum_gw = 0, sum_gw_xhat = 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t i = warp_chunk(k, lane, N);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        if (i + j < n) {
          double gw = norm_gw(gv[k][j], w, i + j, sw);
          sum_gw += gw;
          sum_gw_xhat += gw * norm_xhat(xv[k][j], row);
        }
      }
    }
    if constexpr (!Rms) {
      row.mean_gw = warp_reduce(sum_gw, SumRounded{}) / double(n);
    }
    row.mean_gw_xhat = warp_reduce(sum_gw_xhat, SumRounded{}) / double(n);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t i = warp_chunk(k, lane, N);
      C y[N];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        y[j] = C(0);
        if (i + j < n) {
          double xhat = norm_xhat(xv[k][j], row);
          y[j] = norm_dx<C>(norm_gw(gv[k][j], w, i + j, sw), xhat, row);
          dw[k][j] += static_cast<C>(static_cast<double>(gv[k][j]) * xhat);
        }
      }
      store_chunk<N>(dxr, i, n, dx_aligned, y);
    }
  }
  // Outside the row loop (which depends on the warp): every thread gets
  // here. The warps' sums meet per column, added in warp order.
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int64_t i = warp_chunk(k, lane, N);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (i + j < n) warp_dw[warp][i + j] = static_cast<double>(dw[k][j]);
    }
  }
  __syncthreads();
  double* part = partial + static_cast<int64_t>(blockIdx.x) * n;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    double s = 0;
#pragma unroll
    for (int v = 0; v < warps; ++v) s += warp_dw[v][c];
    part[c] = s;
  }
}

/** norm_vjp_warp's contract for rows of any length, one block per row. */
template <typename T, int N, bool Rms>
__global__ void __launch_bounds__(max_row_block)
    norm_vjp_block(const T* __restrict__ x, const T* __restrict__ w,
                   const T* __restrict__ g, T* __restrict__ dx,
                   double* __restrict__ partial, int64_t rows, int64_t n,
                   int64_t sw, float eps) {
  using C = compute_t<T>;
  double* scratch = reduce_scratch<double>();
  int64_t first = static_cast<int64_t>(threadIdx.x) * N;
  int64_t step = static_cast<int64_t>(blockDim.x) * N;
  // Each thread owns the same columns of every row: it alone touches them.
  double* part = partial + static_cast<int64_t>(blockIdx.x) * n;
  for (int64_t i = first; i < n; i += step) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (i + j < n) part[i + j] = 0;
    }
  }
  // r depends on the block only: every thread reaches each block_reduce.
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    const T* gr = g + r * n;
    T* dxr = dx + r * n;
    bool x_aligned = is_aligned<T, N>(xr), g_aligned = is_aligned<T, N>(gr),
         dx_aligned = is_aligned<T, N>(dxr);
    NormRow<C> stats = block_norm_row<Rms, N>(xr, n, x_aligned, eps, scratch);
    NormVjpRow row{static_cast<double>(stats.mu),
                   static_cast<double>(stats.inv), 0, 0};
    double sum_gw = 0, sum_gw_xhat = 0;
    for (int64_t i = first; i < n; i += step) {
      C xv[N], gv[N];
      load_chunk<N>(xr, i, n, x_aligned, C(0), xv);
      load_chunk<N>(gr, i, n, g_aligned, C(0), gv);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        if (i + j < n) {
          double gw = norm_gw(gv[j], w, i + j, sw);
          sum_gw += gw;
          sum_gw_xhat += gw * norm_xhat(xv[j], row);
        }
      }
    }
    if constexpr (!Rms) {
      row.mean_gw = block_reduce(sum_gw, SumRounded{}, scratch) / double(n);
    }
    row.mean_gw_xhat =
        block_reduce(sum_gw_xhat, SumRounded{}, scratch) / double(n);
    for (int64_t i = first; i < n; i += step) {
      C xv[N], gv[N], y[N];
      load_chunk<N>(xr, i, n, x_aligned, C(0), xv);
      load_chunk<N>(gr, i, n, g_aligned, C(0), gv);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        y[j] = C(0);
        if (i + j < n) {
          double xhat = norm_xhat(xv[j], row);
          y[j] = norm_dx<C>(norm_gw(gv[j], w, i + j, sw), xhat, row);
          part[i + j] += static_cast<double>(gv[j]) * xhat;
        }
      }
      store_chunk<N>(dxr, i, n, dx_aligned, y);
    }
  }
}

/** dweight from the (parts, n) partials of norm_vjp_warp/block, summed in
 *  double in a fixed order and rounded to C then T as on the CPU.
 *  Per column (dw of n elements): blocks of (32, ways <= 32) threads, block
 *  x taking columns [32x, 32x + 32); thread row y sums parts y, y + ways,
 *  ... (independent loads the compiler issues ahead: a column summed by
 *  one thread waited on each of its few hundred loads in turn), and the
 *  rows' sums meet in row order. When scalar (a 0-d weight), one block of
 *  (threads, 1) sums every column into dw[0]. */
template <typename T>
__global__ void norm_vjp_dweight(const double* __restrict__ partial,
                                 T* __restrict__ dw, int64_t parts, int64_t n,
                                 bool scalar) {
  using C = compute_t<T>;
  if (!scalar) {
    __shared__ double sums[warp_size][warp_size]; // [row][column]
    int64_t c = static_cast<int64_t>(blockIdx.x) * warp_size + threadIdx.x;
    double s = 0;
    if (c < n) {
#pragma unroll 4
      for (int64_t p = threadIdx.y; p < parts; p += blockDim.y) {
        s += partial[p * n + c];
      }
    }
    sums[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < n) {
      for (unsigned y = 1; y < blockDim.y; ++y) s += sums[y][threadIdx.x];
      dw[c] = cast_to<T>(static_cast<C>(s));
    }
    return;
  }
  // scalar is uniform over the grid: every thread reaches block_reduce.
  double total = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    for (int64_t p = 0; p < parts; ++p) total += partial[p * n + c];
  }
  total = block_reduce(total, SumRounded{}, reduce_scratch<double>());
  if (threadIdx.x == 0) dw[0] = cast_to<T>(static_cast<C>(total));
}

} // namespace kiln::cuda
