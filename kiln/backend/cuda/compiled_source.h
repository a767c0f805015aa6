// CUDA source for a fused region (Compiled): one kernel per layout variant
// that loads each external input once per element, runs the region's ops
// with the device functors named after their primitives, and stores every
// region output. Shapes are never baked in: the element count, the row
// length and the strided layout are kernel arguments, so shapeless compile
// reuses a kernel.
#pragma once

#include "kiln/backend/common/compiled_region.h"
#include "kiln/backend/cuda/jit_module.h"

namespace kiln::cuda {

/** Elements per vector access of the contiguous kernel, and of the rows
 *  kernel where rows and bases allow it (16 bytes for the widest operand
 *  loaded as vectors: vector and column inputs, outputs). */
int fused_vec_width(const detail::JitKernelSpec& spec);

/** Vectors each thread of the contiguous or rows kernel loads before
 *  computing: two (more 16-byte loads in flight) while that is at most 8
 *  elements, four single elements in the rows kernel without vectors. The
 *  region's code is inlined once per element, and NVRTC's time grows with
 *  the copies. */
int fused_vectors_per_thread(const detail::JitKernelSpec& spec);

/** Consecutive elements of a row each thread of the strided kernel takes
 *  when the innermost collapsed extent is a multiple of it (else one). */
inline constexpr int strided_run_length = 4;

/** The kernel for spec (contiguous, rows of spec.rows_width-element
 *  vectors, or strided; rows and strided with 64-bit indices when large).
 *  Parameters, in order: one pointer per non-constant input, one per output,
 *  the element count (int64), then for the rows kernel the row length n
 *  (int64), for the strided kernel a Strided<K> (device/utils.cuh) holding
 *  the K strided inputs' strides. */
JitKernel fused_kernel(const detail::JitKernelSpec& spec, bool large);

} // namespace kiln::cuda
