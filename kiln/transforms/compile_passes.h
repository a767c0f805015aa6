// compile's graph passes over a trace: simplify (common subexpressions,
// equal scalar constants) and fuse (elementwise regions into Compiled
// nodes), then replay on new inputs.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/compile_log.h"

namespace kiln::detail {

/** A shape-specialized trace's replay, worked out once: every value gets a
 *  slot (the inputs first, then each node's outputs in tape order) and each
 *  node names its operands by slot, so a replay builds the new graph
 *  without looking anything up. */
struct ReplayPlan {
  struct Node {
    std::shared_ptr<Primitive> primitive;
    std::vector<int> operands; // a slot, or -1 - k for constants[k]
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
  };
  std::vector<array> constants; // operands that depend on no input
  std::vector<Node> nodes;
  std::vector<int> outputs; // as operands
  int inputs = 0;
  int slots = 0;
};

struct Trace {
  bool shapeless = false;
  std::vector<array> tracers;  // one per input, in order
  std::vector<array> tape;     // nodes between tracers and outputs, in order
  std::vector<array> outputs;  // user outputs, then captured state
  size_t num_user_outputs = 0;
  std::vector<size_t> state_counts;
  std::shared_ptr<const ReplayPlan> plan; // null for shapeless traces
};

/** Regions larger than these are split (bounded kernel size and argument
 *  count). */
inline constexpr int max_fused_ops = 64;
inline constexpr int max_fused_inputs = 24;

/** The passes over trace. When `refused` is given, reaching one of those
 *  arrays (a function's own inputs, read through a captured reference
 *  instead of their tracers) raises: the walk that builds the tape finds
 *  them, so the check costs no walk of its own. */
void run_passes(Trace& trace, bool simplify, bool fuse,
                const std::vector<array>* refused = nullptr);

/** Works out trace.plan (after the passes; not for shapeless traces). */
void plan_replay(Trace& trace);

/** The traced graph applied to new inputs: new nodes, same primitives. */
std::vector<array> replay(const Trace& trace, const std::vector<array>& inputs);

std::string format_trace(const Trace& trace, bool dot);


} // namespace kiln::detail
