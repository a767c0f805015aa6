// Names and instantiations of the elementwise kernels (device/elementwise.cuh),
// shared by the launchers and the ahead-of-time tables so both agree.
// Names: {v|g}{op}{dtype}; "v" kernels carry one letter per input, v for a
// vector and s for a scalar (e.g. "vsvAddfloat32"); a different output dtype
// is appended after "_", and "_i64" marks the 64-bit-index general variant.
#pragma once

#include <string>

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/backend/cuda/vec_width.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** Elements per thread of a contiguous kernel (vec_width.h). */
inline int vec_width(Dtype a, Dtype b) {
  return elementwise_vec_width(a.size, b.size);
}

/** pattern: "v" (contiguous) or "g" (general). Copies are op "AsType". */
JitKernel unary_kernel(const std::string& op, Dtype in, Dtype out,
                       const std::string& pattern, bool large = false);
/** pattern: "vv", "vs", "sv", "ss" (contiguous) or "g". */
JitKernel binary_kernel(const std::string& op, Dtype in, Dtype out,
                        const std::string& pattern, bool large = false);
/** Select; pattern: three letters of v/s (contiguous) or "g". */
JitKernel ternary_kernel(Dtype t, const std::string& pattern,
                         bool large = false);
/** The tiled transposing copy (device/transpose.cuh) of raw elements of
 *  `raw`'s size (uint8/16/32/64): tTransposeTiles{raw}. */
JitKernel transpose_kernel(Dtype raw);

} // namespace kiln::cuda
