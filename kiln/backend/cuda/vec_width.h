// Elements per thread of the contiguous elementwise kernels, shared by their
// launchers and the ahead-of-time instantiations (aot.cuh), so both agree.
#pragma once

namespace kiln::cuda {

/** For operands of a and b bytes: the narrower type moves at least one
 *  16-byte access per thread and the wider at most two. Where the sizes
 *  differ this matters: a float32 -> bfloat16 cast takes 8 elements, so it
 *  stores 16 bytes per thread rather than 8 (the stores were its limit). */
constexpr int elementwise_vec_width(int a, int b) {
  int narrow = a < b ? a : b, wide = a < b ? b : a;
  return 16 / narrow < 32 / wide ? 16 / narrow : 32 / wide;
}

} // namespace kiln::cuda
