// Copies that transpose: the output's contiguous axis is strided in the
// input and the input's contiguous axis strided in the output (NHWC <->
// CHWN, a matrix's x.T made row-major). The general copy kernel walks one
// side's order, so each warp's accesses to the other land in 32 different
// sectors; with short strided runs (a (32, 56, 56, 128) bfloat16 array's
// batch axis moved innermost) it moved about 0.25 TB/s on an H200. Here a
// block stages a 32 x 32 tile in shared memory, reading it along the
// input's contiguous axis and writing it along the output's.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

inline constexpr int transpose_tile = 32;
inline constexpr int transpose_rows = 8; // the block: 32 x 8 threads

/** out[.., b, .., a] = in[.., a, .., b] over planes of (len_a, len_b): a is
 *  the output's contiguous axis (input stride in_a), b the input's (output
 *  stride out_b); `planes` numbers the other axes (operand 0: in, 1: out).
 *  One tile per block, blockIdx.x = (plane * tiles_b + tile_b) * tiles_a +
 *  tile_a. T: the element's bytes as an unsigned type. */
template <typename T>
__global__ void transpose_tiles(const T* in, T* out, int64_t len_a,
                                int64_t len_b, int64_t in_a, int64_t out_b,
                                Strided<2> planes) {
  __shared__ T tile[transpose_tile][transpose_tile + 1];
  const int64_t tiles_a = (len_a + transpose_tile - 1) / transpose_tile;
  const int64_t tiles_b = (len_b + transpose_tile - 1) / transpose_tile;
  int64_t block = blockIdx.x;
  const int64_t a0 = (block % tiles_a) * transpose_tile;
  block /= tiles_a;
  const int64_t b0 = (block % tiles_b) * transpose_tile;
  int64_t off[2];
  strided_offsets<int64_t, 2>(block / tiles_b, planes, off);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const T* src = in + off[0];
  T* dst = out + off[1];
#pragma unroll
  for (int r = ty; r < transpose_tile; r += transpose_rows) {
    int64_t a = a0 + r, b = b0 + tx;
    if (a < len_a && b < len_b) tile[r][tx] = src[a * in_a + b];
  }
  __syncthreads();
#pragma unroll
  for (int r = ty; r < transpose_tile; r += transpose_rows) {
    int64_t b = b0 + r, a = a0 + tx;
    if (a < len_a && b < len_b) dst[b * out_b + a] = tile[tx][r];
  }
}

} // namespace kiln::cuda
