// Names and instantiations of the kernels that work along one axis, scans
// (device/scan.cuh) and sorts (device/sort.cuh), shared by the launchers and
// the ahead-of-time tables so both agree.
// Scans: {s|r|c}Scan{op}{dtype}[_{out dtype}], op the binary functor that
// combines (Add, Multiply, Maximum, Minimum, LogAddExp); s and r scan one
// line per block (short and long tiles), c one line per thread.
// Sorts: t{tile}{Sort|ArgSort}{dtype}, one line of up to tile elements per
// block; longer lines {r|m|w}{Sort|ArgSort}{dtype} (sorted runs, merges,
// write-out); gSearchSorted{dtype}, one value per thread.
#pragma once

#include <array>
#include <string>

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** Threads and elements per thread of a block-wide scan or sort tile. */
struct Tile {
  int threads;
  int items;
  constexpr int size() const { return threads * items; }
};

/** Scan tiles: 's' for lines of at most 128 elements, 'r' for longer ones
 *  (looping over tiles with a carry), whose threads take 16 bytes of 1-,
 *  2- and 4-byte inputs (one vector load), 32 of 8-byte ones. On an H200,
 *  cumsum of 16M elements: 8 bfloat16 per thread 38.6-44.6 us, 4 per
 *  thread 51-56 us; float32 4 per thread 71-76 us, 8 per thread 74-79. */
inline constexpr Tile short_scan_tile{32, 4};
constexpr Tile long_scan_tile(int in_bytes) {
  return {256, in_bytes >= 4 ? 4 : 8};
}

/** pattern: 's', 'r' or 'c' (one line per block or thread; the three are
 *  compiled together), 't' or 'k' (the two passes of a long line scanned in
 *  pieces, compiled together). */
JitKernel scan_kernel(const std::string& op, Dtype in, Dtype out, char pattern);

/** Sort tiles, smallest first; a line longer than the last one is sorted in
 *  tiles of the last, then merged. 4096 64-bit keys with their indices fill
 * about 33 KiB of the 48 KiB of static shared memory a block may have. */
inline constexpr std::array<Tile, 3> sort_tiles{Tile{32, 4}, Tile{128, 8},
                                                Tile{256, 16}};

/** The kernel for sort_tiles[tile]; the other tiles are compiled alongside. */
JitKernel sort_kernel(Dtype t, bool arg, size_t tile);

/** Lines longer than the largest tile, by stage: 'r' sorts runs of one
 *  tile, 'm' merges pairs of runs, 'w' writes the output. */
JitKernel long_sort_kernel(Dtype t, bool arg, char stage);

JitKernel search_sorted_kernel(Dtype t);

} // namespace kiln::cuda
