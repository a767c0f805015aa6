// im2col for Convolution (channels last, as backend/cpu/conv.cpp): writes a
// tile of the patch matrix, which the GEMM then multiplies by the weight.
// The patch matrix has one row per output position (n, o...) and, per
// group, kernel_size * cg columns in the weight's (K..., C) order; column
// q = kk * cg + c of row (n, o) holds the input element at spatial
// position (o * stride + k * kernel_dilation - padding_lo) / input_dilation
// (k the kernel position kk, reversed when flipped) and channel
// grp * cg + c, or 0 where that position falls in the padding or between
// dilated input elements.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

/** The spatial axes im2col handles (conv1d/2d/3d). */
inline constexpr int conv_max_nd = 3;

/** One tile: rows [row0, row0 + rows) and columns [col0, col0 + cols) of
 *  every group's patch matrix, stored (groups, rows, cols) row-major.
 *  Strides are the input's, in elements. */
struct Im2ColParams {
  int64_t in_stride[conv_max_nd]; // spatial axes
  int64_t batch_stride;
  int64_t chan_stride;
  int64_t row0, col0;
  int64_t rows, cols; // this tile's extent: groups * rows * cols < 2^31
  int32_t in_len[conv_max_nd];
  int32_t out_len[conv_max_nd];
  int32_t k_len[conv_max_nd];
  int32_t stride[conv_max_nd];
  int32_t pad_lo[conv_max_nd]; // may be negative (crops)
  int32_t k_dil[conv_max_nd];
  int32_t in_dil[conv_max_nd];
  int32_t cg; // input channels per group
  int32_t groups;
  int32_t flip;
};

/** One thread per tile element, grid-stride. IdxT (uint32_t, or int64_t
 *  when the patch matrix has 2^32 rows or columns or more) holds the row
 *  and column being decomposed; input offsets are int64. Out is T, or
 *  float for float16/bfloat16 convolutions that accumulate a split
 *  reduction in float32. */
template <typename T, typename Out, int ND, typename IdxT>
__global__ void im2col(const T* __restrict__ in, Out* __restrict__ patches,
                       const __grid_constant__ Im2ColParams p) {
  const uint32_t tile_cols = static_cast<uint32_t>(p.cols);
  const uint32_t tile_rows = static_cast<uint32_t>(p.rows);
  const uint32_t total =
      static_cast<uint32_t>(p.groups) * tile_rows * tile_cols;
  const IdxT cg = static_cast<IdxT>(p.cg);
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += gridDim.x * blockDim.x) {
    uint32_t t = e / tile_cols;
    IdxT q = static_cast<IdxT>(p.col0) + (e - t * tile_cols);
    uint32_t grp = t / tile_rows;
    IdxT r = static_cast<IdxT>(p.row0) + (t - grp * tile_rows);
    IdxT kk = q / cg;
    IdxT c = q - kk * cg;
    // Walk the axes from the last: r splits into (n, o...), kk into k...
    int64_t off = 0;
    bool inside = true;
#pragma unroll
    for (int d = ND - 1; d >= 0; --d) {
      IdxT olen = static_cast<IdxT>(p.out_len[d]);
      IdxT klen = static_cast<IdxT>(p.k_len[d]);
      IdxT rq = r / olen, kq = kk / klen;
      int64_t o = static_cast<int64_t>(r - rq * olen);
      int64_t k = static_cast<int64_t>(kk - kq * klen);
      r = rq;
      kk = kq;
      if (p.flip) k = p.k_len[d] - 1 - k;
      int64_t v = o * p.stride[d] + k * p.k_dil[d] - p.pad_lo[d];
      if (p.in_dil[d] != 1) {
        inside = inside && v % p.in_dil[d] == 0;
        v /= p.in_dil[d];
      }
      inside = inside && v >= 0 && v < p.in_len[d];
      off += v * p.in_stride[d];
    }
    Out value = cast_to<Out>(0.0f);
    if (inside) {
      int64_t n = static_cast<int64_t>(r);
      int64_t ch = static_cast<int64_t>(grp) * p.cg + static_cast<int64_t>(c);
      value = cast_to<Out>(in[n * p.batch_stride + ch * p.chan_stride + off]);
    }
    patches[e] = value;
  }
}

} // namespace kiln::cuda
