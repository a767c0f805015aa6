// Shared machinery of the transformations: marking a trace, wrapping inputs
// as tracers, and ordering the graph between the tracers and the outputs.
#pragma once

#include <unordered_map>
#include <vector>

#include "kiln/core/array.h"

namespace kiln::detail {

/** What a trace is for: a plain trace (compile, vmap) or a gradient. */
enum class TraceKind { plain, vjp, jvp };

/** Marks the current thread as tracing while alive (nests). Arrays built
 *  from tracers are tracers; eval keeps their graph while tracing. A scope
 *  of vjp or jvp also marks it as tracing for a gradient (in_grad_tracing,
 *  in_jvp_tracing). */
class TracingScope {
 public:
  explicit TracingScope(TraceKind kind = TraceKind::plain);
  ~TracingScope();
  TracingScope(const TracingScope&) = delete;
  TracingScope& operator=(const TracingScope&) = delete;

 private:
  const TraceKind kind_;
};

/** Marks the current thread as tracing a shapeless compile while alive. */
class ShapelessScope {
 public:
  ShapelessScope();
  ~ShapelessScope();
  ShapelessScope(const ShapelessScope&) = delete;
  ShapelessScope& operator=(const ShapelessScope&) = delete;
};

/** True while vjp or jvp traces a function in this thread: ops whose fused
 *  primitive differentiates by rebuilding a graph can build that graph
 *  at once instead. */
bool in_grad_tracing();
/** True while jvp traces a function in this thread (possibly inside vjp):
 *  forward-mode rules of fused primitives rebuild their graph. */
bool in_jvp_tracing();

/** Fresh identity nodes over the inputs, marked as tracers, so the graph
 *  built from them can be told apart from the inputs' own history. */
std::vector<array> make_tracers(const std::vector<array>& inputs);

/** The nodes between tracers and outputs in evaluation order (one array per
 *  primitive application), and which arrays depend on the tracers. */
struct Tape {
  std::vector<array> nodes;
  std::unordered_map<uintptr_t, bool> depends;
  /** Indices of node's inputs that depend on the tracers. */
  std::vector<int> differentiable_inputs(const array& node) const;
};
Tape trace_tape(const std::vector<array>& outputs,
                const std::vector<array>& tracers);

} // namespace kiln::detail
