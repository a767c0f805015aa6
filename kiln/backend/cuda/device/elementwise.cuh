// Elementwise kernels: unary (copy and astype are unary with AsType), binary
// and ternary, each as a contiguous variant over data_size elements with
// vector accesses of 16 bytes or more ("v", vec_width.h), and a general
// strided variant over the collapsed shape ("g"), whose IdxT is 32-bit
// unless the array passes 2^32 elements.
// Every kernel loops grid-stride, so any launch size covers any n, and may
// start before the previous kernel ends (GridDependency).
#pragma once

#include "kiln/backend/cuda/device/unary_ops.cuh"
#include "kiln/primitives/binary_table.h"

namespace kiln::cuda {

template <typename Op, typename Out, typename... In>
__device__ __forceinline__ Out apply(In... x) {
  // Where the operands and the result share a dtype, that dtype's form of
  // Op (the fused regions use it too).
  using F = conditional_t<(is_same_v<In, Out> && ...), op_for<Op, Out>, Op>;
  return cast_to<Out>(F{}(cast_to<compute_t<In>>(x)...));
}

template <typename Op, typename In, typename Out, int N>
__global__ void unary_v(const In* __restrict__ in, Out* __restrict__ out,
                        int64_t n) {
  const GridDependency dependency;
  bool vec = is_aligned<In, N>(in) && is_aligned<Out, N>(out);
  for (int64_t i = first_index<N>(); i < n; i += grid_step<N>()) {
    if (vec && i + N <= n) {
      auto x = *reinterpret_cast<const Vec<In, N>*>(in + i);
      Vec<Out, N> y;
#pragma unroll
      for (int j = 0; j < N; ++j) y.v[j] = apply<Op, Out>(x.v[j]);
      *reinterpret_cast<Vec<Out, N>*>(out + i) = y;
    } else {
      for (int j = 0; j < N && i + j < n; ++j) {
        out[i + j] = apply<Op, Out>(in[i + j]);
      }
    }
  }
}

/** Operand 0 is the input, operand 1 the output (which may be strided: a
 *  copy into a view). */
template <typename Op, typename In, typename Out, typename IdxT>
__global__ void unary_g(const In* __restrict__ in, Out* __restrict__ out,
                        int64_t n, const __grid_constant__ Strided<2> l) {
  const GridDependency dependency;
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    int64_t off[2];
    strided_offsets(static_cast<IdxT>(i), l, off);
    out[off[1]] = apply<Op, Out>(in[off[0]]);
  }
}

/** Loads N elements of a contiguous operand at i, or broadcasts its one
 *  element when Scalar. */
template <bool Scalar, typename T, int N>
__device__ __forceinline__ Vec<T, N> load(const T* p, int64_t i) {
  Vec<T, N> x;
  if constexpr (Scalar) {
    T s = p[0];
#pragma unroll
    for (int j = 0; j < N; ++j) x.v[j] = s;
  } else {
    x = *reinterpret_cast<const Vec<T, N>*>(p + i);
  }
  return x;
}

template <typename Op, typename In, typename Out, int N, bool SA, bool SB>
__global__ void binary_v(const In* __restrict__ a, const In* __restrict__ b,
                         Out* __restrict__ out, int64_t n) {
  const GridDependency dependency;
  bool vec = (SA || is_aligned<In, N>(a)) && (SB || is_aligned<In, N>(b)) &&
             is_aligned<Out, N>(out);
  for (int64_t i = first_index<N>(); i < n; i += grid_step<N>()) {
    if (vec && i + N <= n) {
      auto x = load<SA, In, N>(a, i);
      auto y = load<SB, In, N>(b, i);
      Vec<Out, N> z;
#pragma unroll
      for (int j = 0; j < N; ++j) z.v[j] = apply<Op, Out>(x.v[j], y.v[j]);
      *reinterpret_cast<Vec<Out, N>*>(out + i) = z;
    } else {
      for (int j = 0; j < N && i + j < n; ++j) {
        out[i + j] =
            apply<Op, Out>(a[SA ? 0 : i + j], b[SB ? 0 : i + j]);
      }
    }
  }
}

/** Operands a, b, out. */
template <typename Op, typename In, typename Out, typename IdxT>
__global__ void binary_g(const In* __restrict__ a, const In* __restrict__ b,
                         Out* __restrict__ out, int64_t n,
                         const __grid_constant__ Strided<3> l) {
  const GridDependency dependency;
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    int64_t off[3];
    strided_offsets(static_cast<IdxT>(i), l, off);
    out[off[2]] = apply<Op, Out>(a[off[0]], b[off[1]]);
  }
}

template <typename Op, typename T, int N, bool SC, bool SA, bool SB>
__global__ void ternary_v(const bool* __restrict__ c, const T* __restrict__ a,
                          const T* __restrict__ b, T* __restrict__ out,
                          int64_t n) {
  const GridDependency dependency;
  bool vec = (SC || is_aligned<bool, N>(c)) && (SA || is_aligned<T, N>(a)) &&
             (SB || is_aligned<T, N>(b)) && is_aligned<T, N>(out);
  for (int64_t i = first_index<N>(); i < n; i += grid_step<N>()) {
    if (vec && i + N <= n) {
      auto x = load<SC, bool, N>(c, i);
      auto y = load<SA, T, N>(a, i);
      auto z = load<SB, T, N>(b, i);
      Vec<T, N> r;
#pragma unroll
      for (int j = 0; j < N; ++j) r.v[j] = Op{}(x.v[j], y.v[j], z.v[j]);
      *reinterpret_cast<Vec<T, N>*>(out + i) = r;
    } else {
      for (int j = 0; j < N && i + j < n; ++j) {
        out[i + j] = Op{}(c[SC ? 0 : i + j], a[SA ? 0 : i + j],
                          b[SB ? 0 : i + j]);
      }
    }
  }
}

/** Operands c, a, b, out. */
template <typename Op, typename T, typename IdxT>
__global__ void ternary_g(const bool* __restrict__ c, const T* __restrict__ a,
                          const T* __restrict__ b, T* __restrict__ out,
                          int64_t n, const __grid_constant__ Strided<4> l) {
  const GridDependency dependency;
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    int64_t off[4];
    strided_offsets(static_cast<IdxT>(i), l, off);
    out[off[3]] = Op{}(c[off[0]], a[off[1]], b[off[2]]);
  }
}

} // namespace kiln::cuda
