// Tile sizes of the tensor-core attention kernel (device/flash_attention.cuh),
// shared with its host launcher (backend/cuda/sdpa.cpp): plain constants, so
// both the device compilers and the host compiler include this file.
#pragma once

#include "kiln/backend/cuda/device/host_device.cuh"

namespace kiln::cuda {

/** Query rows per block, key rows per tile, threads per block (4 warps of
 *  16 query rows each). */
inline constexpr int flash_rows = 64;
inline constexpr int flash_keys = 64;
inline constexpr int flash_threads = 128;
/** Padding of each shared row, in elements of T (16 bytes): consecutive
 *  rows then start 4 banks apart, so the 8 rows that one ldmatrix matrix
 *  (or one 8-row phase of a wmma load) reads fall in distinct banks. */
inline constexpr int flash_pad_t = 8;

/** Dynamic shared memory of the forward kernel, in bytes, for head
 *  dimension d and elements of t_size bytes: the Q tile and two buffers of
 *  K and V tiles (the next pair loads while one is used), 64 x (d + 8)
 *  each. 45 KiB for d = 64, 85 KiB for d = 128 (past the default 48 KiB:
 *  the launcher raises the limit). */
KILN_HOST_DEVICE constexpr int flash_shared_bytes(int d, int t_size) {
  return 5 * flash_rows * (d + flash_pad_t) * t_size;
}

/** Blocks per SM the forward kernel is built for (its register budget:
 *  65536 / (128 * blocks) per thread): as many as the shared memory allows
 *  on an H100/H200 (227 KiB): 4 for d = 64 (128 registers; the variants
 *  spill 4-16 bytes) and 2 for d = 128 (238-255 registers: O's
 *  accumulators take 64 and S's 32, and ldmatrix results are hoisted; no
 *  spills). `ptxas -v`, sm_90, CUDA 13. */
KILN_HOST_DEVICE constexpr int flash_min_blocks(int d) {
  return d <= 64 ? 4 : 2;
}

/** Threads per block of the backward kernel (device/flash_attention_bwd.cuh):
 *  4 warps of 16 keys each over a tile of 64 keys. */
inline constexpr int flash_bwd_threads = 128;

/** Queries of a tile whose scores (S^T and dP^T) a backward warp holds at
 *  once: 32 (16 registers each), beside its dK and dV fragments (D / 2
 *  registers each). */
KILN_HOST_DEVICE constexpr int flash_bwd_query_chunk(int) { return 32; }

/** Dynamic shared memory of the backward kernel, in bytes: the K and V
 *  tiles, two buffers of Q and dO tiles (the next query tile loads while
 *  one is used), dS^T as T (64 keys x 64 queries) and two buffers of three
 *  floats per query row (max, sum, rowsum(dO * O)). 64.5 KiB for d = 64,
 *  112.5 KiB for d = 128. */
KILN_HOST_DEVICE constexpr int flash_bwd_shared_bytes(int d, int t_size) {
  return 6 * flash_rows * (d + flash_pad_t) * t_size +
         flash_keys * (flash_rows + flash_pad_t) * t_size +
         2 * 3 * flash_rows * 4;
}

/** Blocks per SM the backward kernel is built for (4 warps each; its
 *  register budget is 65536 / (128 * blocks) per thread): 3 for d = 64
 *  (168 registers, no spills; held to 128 for 4 blocks it spilled 36-52
 *  bytes) and 2 for d = 128 (252-255 registers, no spills: dK and dV take
 *  128), within an H100/H200 SM's shared memory (228 KiB, less 1 KiB
 *  reserved per block; at most 227 KiB for one block). `ptxas -v`, sm_90,
 *  CUDA 13. */
KILN_HOST_DEVICE constexpr int flash_bwd_min_blocks(int d) {
  return d <= 64 ? 3 : 2;
}

} // namespace kiln::cuda

#undef KILN_HOST_DEVICE
