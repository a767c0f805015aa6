// Gather and scatter kernels (Gather, Scatter, GatherAxis, ScatterAxis),
// always compiled by NVRTC: each variant is specialized on the number of
// index arrays, the index dtype, the element type (raw bytes where nothing
// is computed), the layout of the index arrays and of the slices, and 32- or
// 64-bit positions. Index values wrap once when negative; a gather clamps a
// slice start into range, a scatter drops a slice that would not fit, as the
// CPU backend does (backend/cpu/indexing.cpp).
#pragma once

#include "kiln/backend/cuda/device/atomics.cuh"

namespace kiln::cuda {

// ---- How a scatter combines an update with the value in place ----------
// The CPU's functors: arithmetic in the compute type, rounded once; NaN wins
// max and min either way.

struct ScatterAssign {
  template <typename T>
  __device__ T operator()(T, T u) const {
    return u;
  }
};
struct ScatterSum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    using C = compute_t<T>;
    return cast_to<T>(cast_to<C>(a) + cast_to<C>(b));
  }
};
struct ScatterProd {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    using C = compute_t<T>;
    return cast_to<T>(cast_to<C>(a) * cast_to<C>(b));
  }
};
template <bool IsMax>
struct ScatterExtreme {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    using C = compute_t<T>;
    C x = cast_to<C>(a), y = cast_to<C>(b);
    if constexpr (is_float_v<C>) {
      if (math::isnan(x)) return a;
      if (math::isnan(y)) return b;
    }
    return (IsMax ? y > x : y < x) ? b : a;
  }
};
using ScatterMax = ScatterExtreme<true>;
using ScatterMin = ScatterExtreme<false>;

template <typename T>
inline constexpr bool is_native_add_v =
    is_same_v<T, float> || is_same_v<T, double> || is_same_v<T, int> ||
    is_same_v<T, unsigned int> || is_same_v<T, long long> ||
    is_same_v<T, unsigned long long>;
template <typename T>
inline constexpr bool is_native_extreme_v =
    is_same_v<T, int> || is_same_v<T, unsigned int> ||
    is_same_v<T, long long> || is_same_v<T, unsigned long long>;

/** *addr = Op(*addr, v), atomically unless Op assigns (then any one of
 *  several updates of the same element wins). */
template <typename Op, typename T>
__device__ __forceinline__ void combine(T* addr, T v) {
  if constexpr (is_same_v<Op, ScatterAssign>) {
    *addr = v;
  } else if constexpr (is_same_v<Op, ScatterSum> && is_complex_v<T>) {
    // A complex sum is the sums of the parts.
    atomicAdd(&addr->re, v.re);
    atomicAdd(&addr->im, v.im);
  } else if constexpr (is_same_v<Op, ScatterSum> && is_native_add_v<T>) {
    if constexpr (is_same_v<T, long long>) {
      // Two's complement: the unsigned sum has the same bits.
      atomicAdd(reinterpret_cast<unsigned long long*>(addr),
                static_cast<unsigned long long>(v));
    } else {
      atomicAdd(addr, v);
    }
  } else if constexpr (is_same_v<Op, ScatterMax> && is_native_extreme_v<T>) {
    atomicMax(addr, v);
  } else if constexpr (is_same_v<Op, ScatterMin> && is_native_extreme_v<T>) {
    atomicMin(addr, v);
  } else {
    atomic_update_cas<Op>(addr, v);
  }
}

// ---- Index arrays ------------------------------------------------------

/** Index value i of an index array, wrapped once when negative. */
template <typename I>
__device__ __forceinline__ int64_t wrapped_index(const void* p, int64_t i,
                                                 int64_t dim) {
  int64_t v = static_cast<int64_t>(static_cast<const I*>(p)[i]);
  return v < 0 ? v + dim : v;
}

/** The index arrays of a gather or scatter (all of one dtype), one per axis
 *  they index: the axis's size and stride in the source (gather) or output
 *  (scatter), the largest start whose slice fits (dim - slice size), and
 *  (scatter) the stride of the axis in the row-major grid of starts. */
template <int N>
struct IndexAxes {
  const void* ptr[N > 0 ? N : 1];
  int64_t dim[N > 0 ? N : 1];
  int64_t stride[N > 0 ? N : 1];
  int64_t last_start[N > 0 ? N : 1];
  int64_t start_stride[N > 0 ? N : 1];
};

/** How a scatter that assigns keeps the CPU's order when several updates
 *  land on one element (the last index position wins): Direct stores every
 *  update (no duplicates possible, or a reduction); Mark records in `owner`
 *  the largest position + 1 landing on each cell, with atomicMax; Write then
 *  stores only the updates of the recorded positions. A cell is a start of
 *  the grid of starts when slices cannot partly overlap (size 1 along every
 *  indexed axis), else an element of the output. */
enum class Ownership { Direct, Mark, Write };

template <Ownership Own>
__device__ __forceinline__ bool owns(unsigned int* owner, int64_t cell,
                                     int64_t pos) {
  unsigned int me = static_cast<unsigned int>(pos) + 1u;
  if constexpr (Own == Ownership::Mark) {
    atomicMax(owner + cell, me);
    return false;
  } else if constexpr (Own == Ownership::Write) {
    return owner[cell] == me;
  } else {
    return true;
  }
}

/** Offsets of index position `pos` in each of K operands that walk the
 *  index shape: pos itself when they are all row-contiguous. */
template <bool Contiguous, typename LocT, int K>
__device__ __forceinline__ void index_offsets(LocT pos, const Strided<K>& l,
                                              int64_t (&off)[K]) {
  if constexpr (Contiguous) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = static_cast<int64_t>(pos);
  } else {
    strided_offsets(pos, l, off);
  }
}

// ---- Gather --------------------------------------------------------------

/** out (row-major: index shape, then slice) from src. `idx` walks the index
 *  shape with each index array's strides (IdxContiguous: all row-major);
 *  `slice` walks the slice with src's strides (SliceContiguous: one run of
 *  stride 1). Starts are clamped so the slice stays inside src. */
template <typename T, typename I, int N, typename LocT, bool IdxContiguous,
          bool SliceContiguous>
__global__ void gather(const T* __restrict__ src, T* __restrict__ out,
                       int64_t n, int64_t slice_size,
                       const __grid_constant__ IndexAxes<N> axes,
                       const __grid_constant__ Strided<(N > 0 ? N : 1)> idx,
                       const __grid_constant__ Strided<1> slice) {
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    LocT pos = static_cast<LocT>(i) / static_cast<LocT>(slice_size);
    LocT s = static_cast<LocT>(i) - pos * static_cast<LocT>(slice_size);
    int64_t off = 0;
    if constexpr (N > 0) {
      int64_t ioff[N];
      index_offsets<IdxContiguous>(pos, idx, ioff);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        int64_t v = wrapped_index<I>(axes.ptr[k], ioff[k], axes.dim[k]);
        v = v < 0 ? 0 : (v > axes.last_start[k] ? axes.last_start[k] : v);
        off += v * axes.stride[k];
      }
    }
    if constexpr (SliceContiguous) {
      off += static_cast<int64_t>(s);
    } else {
      int64_t soff[1];
      strided_offsets(s, slice, soff);
      off += soff[0];
    }
    out[i] = src[off];
  }
}

// ---- Scatter -------------------------------------------------------------

/** Combines each element of upd (index shape, then slice) into out (the
 *  copy of the input, row-major). `idx` walks the index shape with the
 *  index arrays' strides and, last, the updates'; `slice` walks the slice
 *  with out's and the updates' strides. Contiguous: index arrays and
 *  updates row-major and a slice one run of stride 1 in out, so positions
 *  need no unravelling. A slice whose start does not fit is dropped.
 *  PerStart: ownership cells are starts, else output elements. */
template <typename T, typename I, int N, typename Op, typename LocT,
          bool Contiguous, Ownership Own = Ownership::Direct,
          bool PerStart = false>
__global__ void scatter(const T* __restrict__ upd, T* __restrict__ out,
                        unsigned int* __restrict__ owner, int64_t n,
                        int64_t slice_size,
                        const __grid_constant__ IndexAxes<N> axes,
                        const __grid_constant__ Strided<N + 1> idx,
                        const __grid_constant__ Strided<2> slice) {
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    LocT pos = static_cast<LocT>(i) / static_cast<LocT>(slice_size);
    LocT s = static_cast<LocT>(i) - pos * static_cast<LocT>(slice_size);
    int64_t ioff[N + 1];
    index_offsets<Contiguous>(pos, idx, ioff);
    int64_t off = 0, start = 0;
    bool fits = true;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      int64_t v = wrapped_index<I>(axes.ptr[k], ioff[k], axes.dim[k]);
      fits = fits && v >= 0 && v <= axes.last_start[k];
      off += v * axes.stride[k];
      start += v * axes.start_stride[k];
    }
    if (!fits) continue;
    int64_t uoff;
    if constexpr (Contiguous) {
      off += static_cast<int64_t>(s);
      uoff = i;
    } else {
      int64_t soff[2];
      strided_offsets(s, slice, soff);
      off += soff[0];
      uoff = ioff[N] + soff[1];
    }
    if (owns<Own>(owner, PerStart ? start : off, pos)) {
      combine<Op>(out + off, upd[uoff]);
    }
  }
}

// ---- Along one axis ----------------------------------------------------

/** take_along_axis: out (row-major, the index shape) from src. l walks out's
 *  shape with src's strides (0 along the axis) and the indices' strides.
 *  Indices are clamped into [0, dim). */
template <typename T, typename I, typename LocT>
__global__ void gather_axis(const T* __restrict__ src,
                            const I* __restrict__ indices,
                            T* __restrict__ out, int64_t n, int64_t dim,
                            int64_t axis_stride,
                            const __grid_constant__ Strided<2> l) {
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    int64_t off[2];
    strided_offsets(static_cast<LocT>(i), l, off);
    int64_t v = wrapped_index<I>(indices, off[1], dim);
    v = v < 0 ? 0 : (v >= dim ? dim - 1 : v);
    out[i] = src[off[0] + v * axis_stride];
  }
}

/** put_along_axis: combines each update into out. l walks the updates'
 *  shape with out's strides (0 along the axis), the updates' and the
 *  indices'. Indices outside [0, dim) after wrapping are skipped; Own as
 *  for scatter, with output elements as cells. */
template <typename T, typename I, typename Op, typename LocT,
          Ownership Own = Ownership::Direct>
__global__ void scatter_axis(const T* __restrict__ upd,
                             const I* __restrict__ indices,
                             T* __restrict__ out,
                             unsigned int* __restrict__ owner, int64_t n,
                             int64_t dim, int64_t axis_stride,
                             const __grid_constant__ Strided<3> l) {
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    int64_t off[3];
    strided_offsets(static_cast<LocT>(i), l, off);
    int64_t v = wrapped_index<I>(indices, off[2], dim);
    if (v < 0 || v >= dim) continue;
    int64_t o = off[0] + v * axis_stride;
    // Positions are the updates' row-major order; cells output elements.
    if (owns<Own>(owner, o, i)) combine<Op>(out + o, upd[off[1]]);
  }
}

} // namespace kiln::cuda
