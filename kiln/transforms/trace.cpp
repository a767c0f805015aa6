#include "kiln/transforms/trace.h"

#include "kiln/core/primitive.h"
#include "kiln/primitives/shape.h"
#include "kiln/transforms/autograd.h"
#include "kiln/transforms/graph_walk.h"

namespace kiln::detail {

namespace {
thread_local int tracing_depth = 0;
thread_local int vjp_tracing_depth = 0;
thread_local int jvp_tracing_depth = 0;
thread_local int shapeless_depth = 0;

int& depth_of(TraceKind kind) {
  return kind == TraceKind::jvp ? jvp_tracing_depth : vjp_tracing_depth;
}
} // namespace

bool in_tracing() { return tracing_depth > 0; }
bool in_shapeless_tracing() { return shapeless_depth > 0; }
bool shape_follows_replay(const array& a) {
  return shapeless_depth > 0 && a.is_tracer();
}

ShapelessScope::ShapelessScope() { ++shapeless_depth; }
ShapelessScope::~ShapelessScope() { --shapeless_depth; }
bool in_grad_tracing() {
  return vjp_tracing_depth > 0 || jvp_tracing_depth > 0;
}
bool in_jvp_tracing() { return jvp_tracing_depth > 0; }

TracingScope::TracingScope(TraceKind kind) : kind_(kind) {
  ++tracing_depth;
  if (kind_ != TraceKind::plain) ++depth_of(kind_);
}
TracingScope::~TracingScope() {
  --tracing_depth;
  if (kind_ != TraceKind::plain) --depth_of(kind_);
}

std::vector<array> make_tracers(const std::vector<array>& inputs) {
  std::vector<array> out;
  for (auto& in : inputs) {
    auto s = in.has_primitive() ? in.primitive().stream()
                                : default_stream(default_device());
    array t(in.shape(), in.dtype(), std::make_shared<Copy>(s), {in});
    t.set_tracer(true);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<int> Tape::differentiable_inputs(const array& node) const {
  std::vector<int> idx;
  auto& inputs = node.inputs();
  int n = node.primitive().num_differentiable_inputs(
      static_cast<int>(inputs.size()));
  for (int i = 0; i < n; ++i) {
    auto it = depends.find(inputs[i].id());
    if (it != depends.end() && it->second) idx.push_back(i);
  }
  return idx;
}

Tape trace_tape(const std::vector<array>& outputs,
                const std::vector<array>& tracers) {
  Tape tape;
  for (auto& t : tracers) tape.depends[t.id()] = true;
  auto enter = [&](const array& a) {
    // Tracers are leaves: their own history is not part of the trace.
    if (!tape.depends.emplace(a.id(), false).second) return false;
    return a.has_primitive();
  };
  auto leave = [&](const array& a) {
    bool dep = false;
    for (auto& in : a.inputs()) dep |= tape.depends[in.id()];
    for (auto& o : a.outputs()) tape.depends[o.id()] = dep;
    if (dep) tape.nodes.push_back(a);
  };
  walk_graph(outputs, enter, leave);
  return tape;
}

} // namespace kiln::detail
