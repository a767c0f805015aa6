// Scaled dot-product attention forward, one warp per query row, streaming
// over the keys with an online softmax (the running max rescales the
// running sum and the output). Lane l holds features l, l + 32, ... of the
// query and of the output, so every key's dot product is one warp sum and
// every key and value row is read coalesced. Inputs are read through their
// strides (no copies). As on the CPU (backend/cpu/sdpa.cpp) everything is
// computed in float (double for float64): score = q.k * scale, plus an
// additive mask, or the lowest finite value where a boolean mask or the
// causal rule hides the key; a NaN score wins the max; sinks join the max
// and the denominator only. No tensor cores: the first GPU version,
// written for exactness rather than peak speed.
#pragma once

#include "kiln/backend/cuda/device/rows.cuh"

namespace kiln::cuda {

struct SdpaParams {
  int64_t B, Nq, Lq, D, Nkv, Lk, Dv;
  int64_t q_strides[4], k_strides[4], v_strides[4], mask_strides[4];
  int64_t dout_strides[4]; // the backward's cotangent (flash kernels only)
  int64_t sinks_stride;
  float scale;
  int causal;
  int mask_kind; // 0: none, 1: bool (false hides), 2: additive, of type T
};

template <typename A>
__device__ __forceinline__ A lowest_finite() {
  if constexpr (is_same_v<A, float>) {
    return -3.402823466e+38f;
  } else {
    return -1.7976931348623157e+308;
  }
}

/** W: features per lane (max(D, Dv) <= 32 * W). Any block of whole warps. */
template <typename T, int W>
__global__ void sdpa_warp(const T* __restrict__ q, const T* __restrict__ k,
                          const T* __restrict__ v,
                          const void* __restrict__ mask,
                          const T* __restrict__ sinks, T* __restrict__ out,
                          const __grid_constant__ SdpaParams p) {
  using A = compute_t<T>;
  int lane = threadIdx.x % warp_size;
  int64_t rows = p.B * p.Nq * p.Lq;
  int64_t rep = p.Nq / p.Nkv, shift = p.Lk - p.Lq;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_step()) {
    int64_t i = r % p.Lq, h = (r / p.Lq) % p.Nq, b = r / (p.Lq * p.Nq);
    int64_t kh = h / rep;
    const T* qr =
        q + b * p.q_strides[0] + h * p.q_strides[1] + i * p.q_strides[2];
    const T* kb = k + b * p.k_strides[0] + kh * p.k_strides[1];
    const T* vb = v + b * p.v_strides[0] + kh * p.v_strides[1];
    A qv[W], acc[W];
#pragma unroll
    for (int u = 0; u < W; ++u) {
      int64_t d = lane + u * warp_size;
      qv[u] = d < p.D ? cast_to<A>(qr[d * p.q_strides[3]]) : A(0);
      acc[u] = A(0);
    }
    A m = -math::infinity<A>(), den = A(0);
    for (int64_t j = 0; j < p.Lk; ++j) {
      const T* kr = kb + j * p.k_strides[2];
      A dot = A(0);
#pragma unroll
      for (int u = 0; u < W; ++u) {
        int64_t d = lane + u * warp_size;
        if (d < p.D) dot += qv[u] * cast_to<A>(kr[d * p.k_strides[3]]);
      }
      A s = warp_reduce(dot, SumRounded{}) * static_cast<A>(p.scale);
      bool hidden = p.causal && j > i + shift;
      if (p.mask_kind != 0) {
        int64_t off = b * p.mask_strides[0] + h * p.mask_strides[1] +
                      i * p.mask_strides[2] + j * p.mask_strides[3];
        if (p.mask_kind == 1) {
          hidden = hidden || !static_cast<const bool*>(mask)[off];
        } else {
          s += cast_to<A>(static_cast<const T*>(mask)[off]);
        }
      }
      if (hidden) s = lowest_finite<A>();
      // Every lane holds the same s, m and den: the branches are uniform.
      if (s > m || s != s) {
        A f = math::exp(m - s);
        den *= f;
#pragma unroll
        for (int u = 0; u < W; ++u) acc[u] *= f;
        m = s;
      }
      // A -inf score adds nothing (the CPU's exp(-inf - max) = 0); when
      // every score is -inf the row ends as 0 / 0 = NaN, as on the CPU.
      A e = s == -math::infinity<A>() ? A(0) : math::exp(s - m);
      den += e;
      const T* vr = vb + j * p.v_strides[2];
#pragma unroll
      for (int u = 0; u < W; ++u) {
        int64_t d = lane + u * warp_size;
        if (d < p.Dv) acc[u] += e * cast_to<A>(vr[d * p.v_strides[3]]);
      }
    }
    if (sinks) {
      A sink = cast_to<A>(sinks[h * p.sinks_stride]);
      if (sink > m) {
        A f = math::exp(m - sink);
        den *= f;
#pragma unroll
        for (int u = 0; u < W; ++u) acc[u] *= f;
        m = sink;
      }
      den += math::exp(sink - m);
    }
    T* orow = out + r * p.Dv;
#pragma unroll
    for (int u = 0; u < W; ++u) {
      int64_t d = lane + u * warp_size;
      if (d < p.Dv) orow[d] = cast_to<T>(acc[u] / den);
    }
  }
}

} // namespace kiln::cuda
