// Inputs the GPU kernels do not take (a dtype, a layout past their
// dimensions, a machine without cuSOLVER or cuFFT) make a primitive run its
// eval_cpu on host views of them: reading them waits for the GPU and copies
// them back, and the outputs land in host memory, uploaded when a GPU
// kernel reads them. Each is reported by detail::gpu_fallback (KILN_DEBUG=1
// names it, KILN_GPU_STRICT=1 raises). README.md lists these cases.
#pragma once

#include <vector>

#include "kiln/core/primitive.h"

namespace kiln::cuda {

void eval_on_cpu(Primitive& p, const std::vector<array>& inputs,
                 std::vector<array>& outputs);
void eval_on_cpu(UnaryPrimitive& p, const std::vector<array>& inputs,
                 array& out);

} // namespace kiln::cuda
