// Iterative post-order walk over a lazy graph (no recursion, so graphs of
// any depth are fine).
#pragma once

#include <utility>
#include <vector>

#include "kiln/core/array.h"

namespace kiln::detail {

/** For each array reachable from outputs: enter(a) decides whether to walk
 *  a's inputs (it is called once per array; return false to stop there);
 *  leave(a) runs after all of a's inputs have been left. */
template <typename Enter, typename Leave>
void walk_graph(const std::vector<array>& outputs, Enter&& enter,
                Leave&& leave) {
  std::vector<std::pair<array, size_t>> stack;
  for (auto& out : outputs) {
    if (enter(out)) stack.emplace_back(out, 0);
    while (!stack.empty()) {
      auto& [a, next] = stack.back();
      auto& inputs = a.inputs();
      if (next < inputs.size()) {
        const array& in = inputs[next++];
        // may grow the stack: a and next are not used after this
        if (enter(in)) stack.emplace_back(in, 0);
        continue;
      }
      leave(a);
      stack.pop_back();
    }
  }
}

} // namespace kiln::detail
