// RoPE over a row-major x of shape (B, ..., T, D): row r is position
// t = r % T of batch entry r / rows_per_batch. Each thread takes one work
// item of a row: a feature pair j < dims / 2, rotated by the angle
// (t + offset) * scale * inv_freq(j), or one feature past dims, copied.
// As on the CPU (backend/cpu/rope.cpp) the angle and its cos/sin are
// computed in double and the rotation in the compute type, rounded once.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

struct RopeParams {
  int64_t rows;           // x.size() / D
  int64_t D;              // features per row
  int64_t T;              // positions (x.shape(-2))
  int64_t rows_per_batch; // rows / B
  int64_t offset_stride;  // per-batch offsets' stride (0: one offset)
  int64_t freqs_stride;   // freqs' stride (unused without freqs)
  int dims;               // rotated features (even)
  int traditional;        // pairs (2j, 2j + 1) instead of (j, j + dims / 2)
  float base;             // unused with freqs
  float scale;
};

/** offset: int32 (one, or one per batch entry); freqs: float32 (dims / 2)
 *  or null, in which case the frequencies come from base. */
template <typename T>
__global__ void rope(const T* __restrict__ x, T* __restrict__ out,
                     const int32_t* __restrict__ offset,
                     const float* __restrict__ freqs,
                     const __grid_constant__ RopeParams p) {
  using C = compute_t<T>;
  int64_t half = p.dims / 2;
  int64_t items = half + (p.D - p.dims); // per row
  int64_t n = p.rows * items;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       it < n; it += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = it / items, w = it - r * items;
    const T* xr = x + r * p.D;
    T* orow = out + r * p.D;
    if (w >= half) {
      int64_t i = p.dims + (w - half);
      orow[i] = xr[i];
      continue;
    }
    int64_t j = w, t = r % p.T;
    int64_t b = r / p.rows_per_batch;
    double off = offset[b * p.offset_stride];
    double pos = (t + off) * static_cast<double>(p.scale);
    double inv = freqs ? 1.0 / static_cast<double>(freqs[j * p.freqs_stride])
                       : ::exp(-j * ::log(static_cast<double>(p.base)) / half);
    double s, c;
    ::sincos(pos * inv, &s, &c);
    C cj = static_cast<C>(c), sj = static_cast<C>(s);
    int64_t i1 = p.traditional ? 2 * j : j;
    int64_t i2 = p.traditional ? 2 * j + 1 : j + half;
    C x1 = cast_to<C>(xr[i1]), x2 = cast_to<C>(xr[i2]);
    orow[i1] = cast_to<T>(x1 * cj - x2 * sj);
    orow[i2] = cast_to<T>(x1 * sj + x2 * cj);
  }
}

} // namespace kiln::cuda
