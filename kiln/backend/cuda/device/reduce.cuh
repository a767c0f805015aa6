// Reduction kernels: Reduce (sum, prod, max, min, and, or; complex64 sums,
// products, and/or), ArgReduce and NumberOfElements. Every reduction visits its
// elements as "runs": a run of `len` elements at a constant stride, repeated
// over the outer reduced dimensions. Two shapes of kernel cover every layout:
//  - row_reduce: a warp (short rows) or a block (long rows) per output reads
//    the run; contiguous runs use 16-byte loads. A long reduction with few
//    outputs is split over blocks that write partials, reduced by a second
//    row_reduce. The all-reduce of a contiguous array is this case.
//  - col_reduce: threadIdx.x walks the kept inner dimension (coalesced when
//    it is contiguous; with 16-byte loads of V columns per thread where
//    it is aligned) while threadIdx.y splits the reduction; long
//    reductions are split over blocks with a second pass.
// Partials are plain arrays reduced by the same kernels, never atomics, so
// results are reproducible run to run.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

// The reduction operators, named as the CPU backend's (backend/cpu/
// reduce.cpp), with the same identities and NaN rules. A is the accumulator:
// compute_t of the output for sums and products, of the input for max and
// min, bool for and/or (reduce_kernels.cpp picks it).

/** Signed integers add and multiply as unsigned: wrapping, as the CPU's
 *  results do in practice, without signed overflow. */
template <typename A>
__device__ __forceinline__ A wrapping(A a, A b, bool multiply) {
  using U = make_unsigned_t<A>;
  U x = static_cast<U>(a), y = static_cast<U>(b);
  return static_cast<A>(multiply ? static_cast<U>(x * y)
                                 : static_cast<U>(x + y));
}

template <typename A>
struct SumOp {
  using acc = A;
  __device__ static A init() { return A(0); }
  __device__ A operator()(A a, A b) const {
    if constexpr (is_same_v<A, bool>) {
      return a || b;
    } else if constexpr (is_signed_int_v<A>) {
      return wrapping(a, b, false);
    } else {
      return a + b;
    }
  }
};

template <typename A>
struct ProdOp {
  using acc = A;
  __device__ static A init() { return A(1); }
  __device__ A operator()(A a, A b) const {
    if constexpr (is_same_v<A, bool>) {
      return a && b;
    } else if constexpr (is_signed_int_v<A>) {
      return wrapping(a, b, true);
    } else {
      return a * b;
    }
  }
};

/** A NaN wins (propagates) in max and min, as on the CPU. */
template <typename A>
struct MaxOp {
  using acc = A;
  __device__ static A init() { return lowest_value<A>(); }
  __device__ A operator()(A a, A b) const {
    if constexpr (is_float_v<A>) {
      if (math::isnan(b)) return b;
    }
    return b > a ? b : a;
  }
};

template <typename A>
struct MinOp {
  using acc = A;
  __device__ static A init() { return highest_value<A>(); }
  __device__ A operator()(A a, A b) const {
    if constexpr (is_float_v<A>) {
      if (math::isnan(b)) return b;
    }
    return b < a ? b : a;
  }
};

struct AndOp {
  using acc = bool;
  __device__ static bool init() { return true; }
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};

struct OrOp {
  using acc = bool;
  __device__ static bool init() { return false; }
  __device__ bool operator()(bool a, bool b) const { return a || b; }
};

/** ArgMax/ArgMin's accumulator: the best value and its index along the
 *  axis. The first extreme wins; a NaN counts as the extreme, and the first
 *  NaN wins over later ones (as the CPU's sequential scan). */
template <typename C>
struct ArgBest {
  C v;
  uint32_t i;
};

template <bool IsMax, typename C>
struct ArgOp {
  using acc = ArgBest<C>;
  __device__ static acc init() {
    return {IsMax ? lowest_value<C>() : highest_value<C>(), 0xffffffffu};
  }
  /** True when b should replace a. */
  __device__ static bool better(const acc& b, const acc& a) {
    if constexpr (is_float_v<C>) {
      if (math::isnan(a.v)) return math::isnan(b.v) && b.i < a.i;
      if (math::isnan(b.v)) return true;
    }
    if (IsMax ? b.v > a.v : b.v < a.v) return true;
    return b.v == a.v && b.i < a.i;
  }
  __device__ acc operator()(const acc& a, const acc& b) const {
    return better(b, a) ? b : a;
  }
};

// Warp and block combination. Types narrower than 32 bits travel through
// the shuffles as int.
template <typename A>
__device__ __forceinline__ A shuffle_xor(A v, int mask) {
  if constexpr (sizeof(A) < 4) {
    return static_cast<A>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v),
                                          mask));
  } else {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
}
__device__ __forceinline__ complex64_t shuffle_xor(complex64_t v, int mask) {
  return {__shfl_xor_sync(0xffffffffu, v.re, mask),
          __shfl_xor_sync(0xffffffffu, v.im, mask)};
}
template <typename C>
__device__ __forceinline__ ArgBest<C> shuffle_xor(ArgBest<C> v, int mask) {
  return {shuffle_xor(v.v, mask), __shfl_xor_sync(0xffffffffu, v.i, mask)};
}

/** Every lane of the (full) warp gets the warp's reduction. */
template <typename Op, typename A>
__device__ __forceinline__ A warp_reduce(A v) {
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) v = Op{}(v, shuffle_xor(v, m));
  return v;
}

/** The block's reduction, valid in thread 0. Every thread of the block must
 *  call it (it synchronizes); blockDim.x is a multiple of 32, blockDim.y 1.
 *  Ends with a barrier so a caller's loop may call it again. */
template <typename Op, typename A>
__device__ A block_reduce(A v) {
  __shared__ A warp_totals[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce<Op>(v);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? warp_totals[lane]
                                                  : Op::init();
    v = warp_reduce<Op>(v);
  }
  __syncthreads();
  return v;
}

/** Calls f(x, i) for the elements p[i], i < n, that `lane` of `lanes`
 *  threads owns: a scalar head up to 16-byte alignment, N-element vector
 *  loads over the body, a scalar tail. */
template <int N, typename In, typename F>
__device__ __forceinline__ void for_each_in_run(const In* p, int64_t n,
                                                int64_t lane, int64_t lanes,
                                                F&& f) {
  int64_t head = 0;
  if constexpr (N > 1) {
    // Elements are aligned to their size, so this counts whole elements.
    int64_t mis = static_cast<int64_t>(
        (reinterpret_cast<uintptr_t>(p) / sizeof(In)) % N);
    head = mis == 0 ? 0 : N - mis;
    if (head > n) head = n;
  }
  for (int64_t i = lane; i < head; i += lanes) f(p[i], i);
  int64_t vectors = (n - head) / N;
  auto* body = reinterpret_cast<const Vec<In, N>*>(p + head);
#pragma unroll 4
  for (int64_t j = lane; j < vectors; j += lanes) {
    Vec<In, N> x = body[j];
#pragma unroll
    for (int k = 0; k < N; ++k) f(x.v[k], head + j * N + k);
  }
  for (int64_t i = head + vectors * N + lane; i < n; i += lanes) f(p[i], i);
}

/**
 * Row reduce. Work item w (of n_items = outputs * splits) reduces, for
 * output o = w / splits, elements [c * chunk, (c + 1) * chunk) (c = w %
 * splits) of the run at each of the n_outer outer reduced positions:
 *   in[kept(o) + outer(r) + j * stride].
 * It writes out[w]: the output itself when splits is 1, else a partial that
 * a second row_reduce (splits = 1) combines. Warp: a warp per item, else the
 * whole block.
 */
template <typename Op, typename In, typename Out, int N, bool Warp,
          typename IdxT>
__global__ void row_reduce(const In* __restrict__ in, Out* __restrict__ out,
                           int64_t n_items, int64_t splits, int64_t chunk,
                           int64_t len, int64_t stride, int64_t n_outer,
                           const __grid_constant__ Strided<1> kept,
                           const __grid_constant__ Strided<1> outer) {
  using A = typename Op::acc;
  const int64_t lanes = Warp ? 32 : blockDim.x;
  const int64_t lane = Warp ? threadIdx.x % 32 : threadIdx.x;
  const int64_t per_block = Warp ? blockDim.x / 32 : 1;
  const int64_t first = blockIdx.x * per_block + (Warp ? threadIdx.x / 32 : 0);
  // Block mode: w is the same in every thread, so the barriers inside
  // block_reduce are reached by the whole block.
  for (int64_t w = first; w < n_items; w += gridDim.x * per_block) {
    int64_t o = w / splits, c = w - o * splits;
    int64_t begin = c * chunk;
    int64_t n = len - begin < chunk ? len - begin : chunk;
    int64_t koff[1];
    strided_offsets(static_cast<IdxT>(o), kept, koff);
    A acc = Op::init();
    auto add = [&](In x, int64_t) { acc = Op{}(acc, cast_to<A>(x)); };
    for (int64_t r = 0; r < n_outer; ++r) {
      int64_t roff[1];
      strided_offsets(static_cast<IdxT>(r), outer, roff);
      const In* p = in + koff[0] + roff[0] + begin * stride;
      if (stride == 1) {
        for_each_in_run<N>(p, n, lane, lanes, add);
      } else {
        for (int64_t j = lane; j < n; j += lanes) add(p[j * stride], j);
      }
    }
    if constexpr (Warp) {
      acc = warp_reduce<Op>(acc);
    } else {
      acc = block_reduce<Op>(acc);
    }
    if (lane == 0) out[w] = cast_to<Out>(acc);
  }
}

/**
 * Column reduce over a (BX, BY) block, BX * BY <= 256 and BY a power of
 * two. The kept dimensions are n_krows outer positions (kept_outer) times
 * an inner run of k_len outputs at k_stride; the reduced ones a flat index
 * i < n_red, i = q * len + r at outer(q) + r * stride. Work item w covers
 * kept row kr, the BX * V outputs of column tile t and the reduced indices
 * [c * chunk, (c + 1) * chunk), with (kr, t, c) from w. Thread (x, y) reads
 * output columns (t * BX + x) * V + [0, V) at reduced indices begin + y,
 * begin + y + BY, ... With V > 1 (the launcher checks: k_stride 1, and the
 * base, stride and every outer stride multiples of V elements, 16-byte
 * aligned) a thread's V columns are one vector load: a warp reads 512
 * contiguous bytes of a row instead of 32 elements. It writes
 * out[c * n_out + o] for output o: the output itself when splits is 1, else
 * a partial that a second col_reduce combines.
 */
template <typename Op, typename In, typename Out, int V, typename IdxT>
__global__ void col_reduce(const In* __restrict__ in, Out* __restrict__ out,
                           int64_t n_krows, int64_t k_len, int64_t k_stride,
                           int64_t tiles, int64_t splits, int64_t chunk,
                           int64_t n_red, int64_t len, int64_t stride,
                           const __grid_constant__ Strided<1> kept_outer,
                           const __grid_constant__ Strided<1> outer) {
  using A = typename Op::acc;
  __shared__ A lanes[256 * V];
  const int64_t n_out = n_krows * k_len;
  const int64_t n_items = n_krows * tiles * splits;
  const int x = threadIdx.x, y = threadIdx.y, bx = blockDim.x;
  for (int64_t w = blockIdx.x; w < n_items; w += gridDim.x) {
    int64_t c = w % splits, rest = w / splits;
    int64_t t = rest % tiles, kr = rest / tiles;
    int64_t col = (t * bx + x) * V;
    // Columns of this thread that exist: all V, or the last tile's rest.
    const int cols = k_len - col >= V ? V : k_len > col ? int(k_len - col) : 0;
    A acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = Op::init();
    // Adds the thread's V (or cols) elements of the reduced position at p.
    auto add_at = [&](const In* p) {
      if (V > 1 && cols == V) {
        Vec<In, V> e = *reinterpret_cast<const Vec<In, V>*>(p);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = Op{}(acc[v], cast_to<A>(e.v[v]));
      } else {
        // Unrolled with a guard: a runtime index would put acc in local
        // memory.
#pragma unroll
        for (int v = 0; v < V; ++v) {
          if (v < cols) acc[v] = Op{}(acc[v], cast_to<A>(p[v * k_stride]));
        }
      }
    };
    if (cols > 0) {
      int64_t koff[1];
      strided_offsets(static_cast<IdxT>(kr), kept_outer, koff);
      const In* p = in + koff[0] + col * k_stride;
      int64_t begin = c * chunk;
      int64_t end = n_red - begin < chunk ? n_red : begin + chunk;
      int64_t i = begin + y;
      const int64_t step = blockDim.y;
      if (outer.ndim == 0 && V == 1) {
        // One reduced run (offset i * stride), the common case: four loads
        // in flight per thread before they are combined.
        for (; i + 3 * step < end; i += 4 * step) {
          In x0 = p[i * stride], x1 = p[(i + step) * stride];
          In x2 = p[(i + 2 * step) * stride], x3 = p[(i + 3 * step) * stride];
          acc[0] = Op{}(acc[0], cast_to<A>(x0));
          acc[0] = Op{}(acc[0], cast_to<A>(x1));
          acc[0] = Op{}(acc[0], cast_to<A>(x2));
          acc[0] = Op{}(acc[0], cast_to<A>(x3));
        }
        for (; i < end; i += step)
          acc[0] = Op{}(acc[0], cast_to<A>(p[i * stride]));
      } else if (outer.ndim == 0) {
        if (V > 1 && cols == V) {
          // Whole vectors: four loads in flight per thread before they are
          // added (two left a bias gradient's column sums at half the copy
          // rate), rows added in the same order.
          for (; i + 3 * step < end; i += 4 * step) {
            Vec<In, V> e[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              e[u] = *reinterpret_cast<const Vec<In, V>*>(
                  p + (i + u * step) * stride);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
#pragma unroll
              for (int v = 0; v < V; ++v) {
                acc[v] = Op{}(acc[v], cast_to<A>(e[u].v[v]));
              }
            }
          }
        }
        for (; i < end; i += step) add_at(p + i * stride);
      } else if (i < end) {
        // Walk i as (q, r), recomputing the outer offset only when q moves.
        int64_t q = i / len, r = i - q * len, qoff[1];
        strided_offsets(static_cast<IdxT>(q), outer, qoff);
        for (; i < end; i += step) {
          add_at(p + qoff[0] + r * stride);
          r += step;
          if (r >= len) {
            q += r / len;
            r %= len;
            strided_offsets(static_cast<IdxT>(q), outer, qoff);
          }
        }
      }
    }
    // Combine the BY lanes of each column (barriers outside the branches).
#pragma unroll
    for (int v = 0; v < V; ++v) lanes[(y * bx + x) * V + v] = acc[v];
    __syncthreads();
    for (int s = blockDim.y / 2; s > 0; s /= 2) {
      if (y < s) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
          lanes[(y * bx + x) * V + v] = Op{}(lanes[(y * bx + x) * V + v],
                                             lanes[((y + s) * bx + x) * V + v]);
        }
      }
      __syncthreads();
    }
    if (y == 0) {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        if (v < cols) {
          out[c * n_out + kr * k_len + col + v] =
              cast_to<Out>(lanes[x * V + v]);
        }
      }
    }
    __syncthreads();
  }
}

/** ArgReduce along a run of len elements at stride, a warp (Warp) or a
 *  block per output o, which starts at kept(o). */
template <bool IsMax, typename T, bool Warp, typename IdxT>
__global__ void arg_reduce_row(const T* __restrict__ in,
                               uint32_t* __restrict__ out, int64_t n_out,
                               int64_t len, int64_t stride,
                               const __grid_constant__ Strided<1> kept) {
  using Op = ArgOp<IsMax, compute_t<T>>;
  using A = typename Op::acc;
  constexpr int N = 16 / sizeof(T);
  const int64_t lanes = Warp ? 32 : blockDim.x;
  const int64_t lane = Warp ? threadIdx.x % 32 : threadIdx.x;
  const int64_t per_block = Warp ? blockDim.x / 32 : 1;
  const int64_t first = blockIdx.x * per_block + (Warp ? threadIdx.x / 32 : 0);
  for (int64_t o = first; o < n_out; o += gridDim.x * per_block) {
    int64_t koff[1];
    strided_offsets(static_cast<IdxT>(o), kept, koff);
    const T* p = in + koff[0];
    A best = Op::init();
    auto visit = [&](T x, int64_t i) {
      best = Op{}(best, A{cast_to<compute_t<T>>(x), static_cast<uint32_t>(i)});
    };
    if (stride == 1) {
      for_each_in_run<N>(p, len, lane, lanes, visit);
    } else {
      for (int64_t i = lane; i < len; i += lanes) visit(p[i * stride], i);
    }
    if constexpr (Warp) {
      best = warp_reduce<Op>(best);
    } else {
      best = block_reduce<Op>(best);
    }
    if (lane == 0) out[o] = best.i;
  }
}

/** ArgReduce with a thread per output, walking the axis in order: for many
 *  outputs along a strided axis, where neighbouring threads read
 *  neighbouring elements when the kept inner dimension is contiguous. */
template <bool IsMax, typename T, typename IdxT>
__global__ void arg_reduce_col(const T* __restrict__ in,
                               uint32_t* __restrict__ out, int64_t n_out,
                               int64_t len, int64_t stride,
                               const __grid_constant__ Strided<1> kept) {
  using Op = ArgOp<IsMax, compute_t<T>>;
  using A = typename Op::acc;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x +
                   threadIdx.x;
       o < n_out; o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t koff[1];
    strided_offsets(static_cast<IdxT>(o), kept, koff);
    const T* p = in + koff[0];
    A best = Op::init();
    for (int64_t i = 0; i < len; ++i) {
      best = Op{}(best, A{cast_to<compute_t<T>>(p[i * stride]),
                          static_cast<uint32_t>(i)});
    }
    out[o] = best.i;
  }
}

/** NumberOfElements: the count, computed on the host from the shape, stored
 *  in the output's dtype on the stream (no host copy to wait for). */
template <typename T>
__global__ void number_of_elements(T* out, double n) {
  *out = cast_to<T>(n);
}

} // namespace kiln::cuda
