// Evaluation of lazy graphs: iterative (no recursion depth limit), freeing
// each intermediate as soon as its last consumer has run.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <vector>

#include "kiln/core/array.h"

namespace kiln {

/** Evaluate the arrays and everything they depend on. */
void eval(std::vector<array> outputs);
template <typename... Arrays>
void eval(Arrays&&... outputs) {
  eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}

/** Arrays equal to inputs that are evaluated only after dependencies
 *  (which contribute no gradient). */
std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies);

/** Start evaluating in the background; array::wait (or eval) joins. */
void async_eval(std::vector<array> outputs);

namespace detail {

/** Signalled when an async evaluation finishes, carrying its error if any. */
struct Event {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  void wait();
  void signal(std::exception_ptr e = nullptr);
};

/** Waits for every async_eval; raises the first error among those that
 *  failed since the last wait (as MLX's synchronize raises it). */
void wait_for_async_evals();

/** The graph in evaluation order, without arrays that are already
 *  available; pending async events reached are appended to `pending`. */
std::vector<array> build_tape(const std::vector<array>& outputs,
                              std::vector<std::shared_ptr<Event>>& pending);

} // namespace detail

} // namespace kiln
