// Running the nodes of a small graph that a primitive is defined by (a fused
// region that no kernel takes, a fallback's ops) from inside that
// primitive's own evaluation: on the calling thread, each node by its own
// eval_cpu or eval_gpu. Not kiln::eval: no lock, no scheduling, no waiting
// for other evaluations, and the nodes stay attached (they are the
// caller's and go when it drops them).
#pragma once

#include <vector>

#include "kiln/core/array.h"

namespace kiln::detail {

/** Computes every node `outputs` need that is not available yet, each
 *  after its inputs. The graph's leaves must be available. */
void run_nodes(const std::vector<array>& outputs);

} // namespace kiln::detail
