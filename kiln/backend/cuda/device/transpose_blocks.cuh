// The transposing copy's block shape, shared by its kernel (transpose.cuh)
// and its launcher (elementwise.cpp): plain C++, so host code includes it
// too.
#pragma once

#include "kiln/backend/cuda/device/host_device.cuh"

namespace kiln::cuda {

inline constexpr int transpose_tile = 32;
inline constexpr int transpose_rows = 8; // the block: 32 x 8 threads

/** Tiles per block for elements of `bytes` bytes: each thread then has 32
 *  bytes of loads in flight before the block's barrier (4 elements per
 *  tile; 16 for bytes, whose 8 tiles would take 122 registers), where one
 *  tile of 16-bit elements gave it 8 and the copy reached a third of the
 *  bandwidth. */
KILN_HOST_DEVICE constexpr int transpose_tiles_per_block(int bytes) {
  return bytes >= 8 ? 1 : (bytes == 4 ? 2 : 4);
}

} // namespace kiln::cuda
