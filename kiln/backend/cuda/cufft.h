// cuFFT, loaded at run time (dlopen) as cuDNN is, so it is no link
// dependency of the library: without it the FFT primitive runs on the CPU.
// Plans are cached by layout; each transform takes its work area from
// kiln's allocator on the stream it runs on.
#pragma once

#include <array>
#include <cstdint>

#include "kiln/core/device.h"

namespace kiln::cuda::cufft {

/** True when a cuFFT library loaded (KILN_CUFFT_LIBRARY, else libcufft.so.12
 *  or .11 from the loader's path or the toolkit's library directory). */
bool available();

enum class Kind { c2c, r2c, c2r };

/** A batch of rank-1 to rank-3 transforms of dims[0..rank) points laid out
 *  row-major (a real side of r2c/c2r holds all the points, the complex side
 *  dims[rank - 1] / 2 + 1 of the last dimension), with consecutive points
 *  `stride` elements apart: stride 1 packs each transform after the
 *  previous one; a larger stride interleaves `batch` == stride transforms,
 *  one element apart (an axis with `stride` elements after it). With
 *  `packed_output` the output packs each transform after the previous one
 *  whatever the input's stride. */
struct Layout {
  Kind kind;
  int rank;
  std::array<int64_t, 3> dims;
  int64_t batch;
  int64_t stride = 1;
  bool packed_output = false;
};

/** Runs the transform of `layout` from `in` to `out` (they may be the same
 *  buffer for c2c) on stream s, unscaled; `inverse` for c2c. c2r overwrites
 *  its input. Throws std::runtime_error naming the cuFFT status on failure. */
void execute(const Layout& layout, void* in, void* out, bool inverse,
             const Stream& s);

} // namespace kiln::cuda::cufft
