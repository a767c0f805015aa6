// The quantized matvecs' block shape, shared by the kernels
// (quantized.cuh, quantized_fp.cuh) and their launcher (quantized.cpp):
// plain C++, so host code includes it too.
#pragma once

namespace kiln::cuda {

/** Threads of a quantized matvec block, and output rows per group of its
 *  threads. */
inline constexpr int qmv_threads = 128;
inline constexpr int qmv_outputs = 4;

} // namespace kiln::cuda
