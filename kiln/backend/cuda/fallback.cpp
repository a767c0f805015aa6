// eval_on_cpu: a primitive whose inputs the GPU kernels cannot take, found
// only when the graph runs (a layout past the kernels' dimensions, a library
// that declines a problem), runs its eval_cpu on host views. The fallbacks
// known from dtypes and shapes are taken when the graph is built instead.
#include "kiln/backend/cuda/fallback.h"

#include <string>

#include "kiln/core/gpu_fallback.h"
#include "kiln/core/primitive.h"
#include "kiln/ops/utils.h"

namespace kiln::cuda {

namespace {

// "these inputs at run time (float16 array of shape (4, 8), ...)".
std::string describe(const std::vector<array>& inputs) {
  std::string s;
  for (auto& a : inputs) s += (s.empty() ? "" : ", ") + detail::describe(a);
  return "these inputs at run time (" + s + ")";
}

} // namespace

void eval_on_cpu(Primitive& p, const std::vector<array>& inputs,
                 std::vector<array>& outputs) {
  detail::gpu_fallback(p.name(), describe(inputs));
  p.eval_cpu(inputs, outputs);
}

void eval_on_cpu(UnaryPrimitive& p, const std::vector<array>& inputs,
                 array& out) {
  detail::gpu_fallback(p.name(), describe(inputs));
  p.eval_cpu(inputs, out);
}

} // namespace kiln::cuda
