// 2-d walks in square tiles, for loops that read one operand along its
// rows and another down its columns (a transposed operand): within a tile
// both stay within a few cache lines, where a row-by-row walk would touch a
// new line of the transposed operand at every step.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kiln/core/thread_pool.h"

namespace kiln::detail {

/** Side of a tile, in elements. */
inline constexpr int64_t tile_side = 32;

/** Calls f(r0, r1, c0, c1) for every tile of a rows x cols grid, the row
 *  tiles split across the thread pool. */
template <typename F>
void for_each_tile(int64_t rows, int64_t cols, F&& f) {
  size_t row_tiles = static_cast<size_t>((rows + tile_side - 1) / tile_side);
  parallel_for(row_tiles, 4, [&](size_t b, size_t e) {
    for (int64_t r0 = static_cast<int64_t>(b) * tile_side;
         r0 < std::min<int64_t>(rows, static_cast<int64_t>(e) * tile_side);
         r0 += tile_side) {
      int64_t r1 = std::min(rows, r0 + tile_side);
      for (int64_t c0 = 0; c0 < cols; c0 += tile_side) {
        f(r0, r1, c0, std::min(cols, c0 + tile_side));
      }
    }
  });
}

} // namespace kiln::detail
