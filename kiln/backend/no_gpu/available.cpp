// The CPU-only build: no GPU is ever available, so every primitive runs its
// eval_cpu and Primitive::eval_gpu's default (which throws) is unreachable.
#include "kiln/core/device.h"

namespace kiln::gpu {

bool is_available() { return false; }

} // namespace kiln::gpu
