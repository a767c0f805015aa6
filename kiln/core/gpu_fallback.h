// The GPU's fallbacks to the CPU, in one place: where an op's inputs have no
// GPU kernel (a dtype, a layout past the kernels' dimensions, a library
// that is not there), the primitive runs on the CPU. Most are decided when
// the graph is built (the op places the primitive on the CPU); the few that
// depend on a layout known only when the graph runs are taken there. Each
// is reported here: KILN_DEBUG=1 prints it once per primitive and reason,
// KILN_GPU_STRICT=1 raises instead. docs/behaviour.md lists them.
#pragma once

#include <string>

namespace kiln::detail {

/** A GPU fallback about to be taken: logs it, or throws std::runtime_error
 *  under KILN_GPU_STRICT=1. */
void gpu_fallback(const std::string& primitive, const std::string& reason);

} // namespace kiln::detail
