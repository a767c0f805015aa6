// Copies that transpose: the output's contiguous axis is strided in the
// input and the input's contiguous axis strided in the output (NHWC <->
// CHWN, a matrix's x.T made row-major). The general copy kernel walks one
// side's order, so each warp's accesses to the other land in 32 different
// sectors; with short strided runs (a (32, 56, 56, 128) bfloat16 array's
// batch axis moved innermost) it moved about 0.25 TB/s on an H200. Here a
// block stages a 32 x 32 tile in shared memory, reading it along the
// input's contiguous axis and writing it along the output's.
#pragma once

#include "kiln/backend/cuda/device/transpose_blocks.cuh"
#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

/** out[.., b, .., a] = in[.., a, .., b] over planes of (len_a, len_b): a is
 *  the output's contiguous axis (input stride in_a), b the input's (output
 *  stride out_b); `planes` numbers the other axes (operand 0: in, 1: out).
 *  Tiles are numbered (plane * tiles_b + tile_b) * tiles_a + tile_a; block
 *  i takes tiles i * K .. i * K + K - 1 of the `tiles` (K =
 *  transpose_tiles_per_block(sizeof(T))), loading all of them before storing
 * any. T: the element's bytes as an unsigned type. */
template <typename T>
__global__ void transpose_tiles(const T* in, T* out, int64_t len_a,
                                int64_t len_b, int64_t in_a, int64_t out_b,
                                int64_t tiles, Strided<2> planes) {
  constexpr int K = transpose_tiles_per_block(sizeof(T));
  constexpr int R = transpose_tile / transpose_rows; // rows per thread
  __shared__ T tile[K][transpose_tile][transpose_tile + 1];
  const int64_t tiles_a = (len_a + transpose_tile - 1) / transpose_tile;
  const int64_t tiles_b = (len_b + transpose_tile - 1) / transpose_tile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  int64_t a0[K], b0[K], in_off[K], out_off[K];
  T v[K][R];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int64_t t = static_cast<int64_t>(blockIdx.x) * K + k;
    // Past the last tile: an empty one (nothing read or written).
    a0[k] = t < tiles ? (t % tiles_a) * transpose_tile : len_a;
    t /= tiles_a;
    b0[k] = (t % tiles_b) * transpose_tile;
    int64_t off[2];
    strided_offsets<int64_t, 2>(t / tiles_b, planes, off);
    in_off[k] = off[0];
    out_off[k] = off[1];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int64_t a = a0[k] + ty + r * transpose_rows, b = b0[k] + tx;
      if (a < len_a && b < len_b) v[k][r] = in[in_off[k] + a * in_a + b];
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int r = 0; r < R; ++r) tile[k][ty + r * transpose_rows][tx] = v[k][r];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int64_t b = b0[k] + ty + r * transpose_rows, a = a0[k] + tx;
      if (a < len_a && b < len_b) {
        out[out_off[k] + b * out_b + a] = tile[k][tx][ty + r * transpose_rows];
      }
    }
  }
}

} // namespace kiln::cuda
