#include "kiln/core/run_nodes.h"

#include <unordered_set>
#include <utility>

#include "kiln/core/primitive.h"

namespace kiln::detail {

void run_nodes(const std::vector<array>& outputs) {
  // Post-order by an explicit stack: a node follows its inputs.
  std::vector<array> order;
  std::vector<std::pair<array, bool>> stack;
  std::unordered_set<uintptr_t> seen;
  for (auto& o : outputs) stack.push_back({o, false});
  while (!stack.empty()) {
    auto [a, expanded] = std::move(stack.back());
    stack.pop_back();
    if (expanded) {
      order.push_back(std::move(a));
      continue;
    }
    if (a.is_available() || !seen.insert(a.id()).second) continue;
    auto inputs = a.inputs();
    stack.push_back({std::move(a), true});
    for (auto& in : inputs) stack.push_back({in, false});
  }
  for (auto& a : order) {
    auto outs = a.outputs();
    Primitive& p = a.primitive();
    if (p.device() == Device::cpu) {
      p.eval_cpu(a.inputs(), outs);
    } else {
      p.eval_gpu(a.inputs(), outs);
    }
    for (auto& o : outs) o.set_status(array::Status::available);
  }
}

} // namespace kiln::detail
