// compile's cache, trace and replay. The graph passes live in
// compile_passes.cpp.
#include "kiln/transforms/compile.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "kiln/core/env.h"
#include "kiln/core/primitive.h"
#include "kiln/ops/random.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/compiled.h"
#include "kiln/transforms/compile_passes.h"
#include "kiln/core/profile.h"
#include "kiln/transforms/trace.h"

namespace kiln {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> f{!env::flag("KILN_DISABLE_COMPILE", false)};
  return f;
}

std::atomic<bool> simplify_enabled{true};
std::atomic<bool> fuse_enabled{true};

// The inputs' signature: per input its dtype, rank and (unless shapeless)
// shape. Lookup is one hash, whatever the number of cached traces.
struct Signature {
  std::vector<int64_t> key;
  bool operator==(const Signature& o) const { return key == o.key; }
};

struct SignatureHash {
  size_t operator()(const Signature& s) const {
    size_t h = 1469598103934665603ull;
    for (auto v : s.key) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

Signature signature(const std::vector<array>& inputs, bool shapeless) {
  Signature s;
  s.key.reserve(inputs.size() * 4);
  for (auto& in : inputs) {
    s.key.push_back(static_cast<int64_t>(in.dtype().val));
    s.key.push_back(static_cast<int64_t>(in.ndim()));
    if (!shapeless) {
      for (auto d : in.shape()) s.key.push_back(d);
    }
  }
  return s;
}

struct CompiledFunction {
  Fn fun;
  CompileOptions options;
  std::mutex mutex;
  std::unordered_map<Signature, std::shared_ptr<detail::Trace>, SignatureHash>
      traces;
};

std::vector<array> gather_inputs(CompiledFunction& cf,
                                 const std::vector<array>& args,
                                 std::vector<size_t>& counts) {
  auto inputs = args;
  for (auto& st : cf.options.inputs) {
    auto v = st.get();
    counts.push_back(v.size());
    inputs.insert(inputs.end(), v.begin(), v.end());
  }
  return inputs;
}

std::shared_ptr<detail::Trace> build_trace(CompiledFunction& cf,
                                           const std::vector<array>& inputs,
                                           size_t n_args,
                                           const std::vector<size_t>& counts) {
  auto trace = std::make_shared<detail::Trace>();
  trace->shapeless = cf.options.shapeless;
  // Inside another transformation the inputs are that transformation's
  // tracers, which the function may also capture (a compiled function
  // defined under vmap): only a top-level trace checks for captured inputs.
  bool nested = detail::in_tracing();
  detail::TracingScope scope;
  std::optional<detail::ShapelessScope> shapeless;
  if (trace->shapeless) shapeless.emplace();
  trace->tracers = detail::make_tracers(inputs);
  // Captured state sees the tracers while the function runs.
  size_t off = n_args;
  for (size_t k = 0; k < cf.options.inputs.size(); ++k) {
    std::vector<array> part(trace->tracers.begin() + off,
                            trace->tracers.begin() + off + counts[k]);
    cf.options.inputs[k].set(part);
    off += counts[k];
  }
  // Afterwards the captured state holds its own arrays again where it
  // still holds the tracers (as MLX): a state that is only an input is
  // unchanged by the call.
  auto restore = [&] {
    size_t at = n_args;
    for (size_t k = 0; k < cf.options.inputs.size(); ++k) {
      auto cur = cf.options.inputs[k].get();
      for (size_t i = 0; i < cur.size() && i < counts[k]; ++i) {
        if (cur[i].id() == trace->tracers[at + i].id()) cur[i] = inputs[at + i];
      }
      cf.options.inputs[k].set(cur);
      at += counts[k];
    }
  };
  std::vector<array> args(trace->tracers.begin(),
                          trace->tracers.begin() + n_args);
  try {
    trace->outputs = cf.fun(args);
  } catch (...) {
    restore();
    throw;
  }
  trace->num_user_outputs = trace->outputs.size();
  for (auto& st : cf.options.outputs) {
    auto v = st.get();
    trace->state_counts.push_back(v.size());
    trace->outputs.insert(trace->outputs.end(), v.begin(), v.end());
  }
  restore();
  // Only a top-level trace refuses its inputs reached uncaptured.
  detail::run_passes(*trace, simplify_enabled.load(), fuse_enabled.load(),
                     nested ? nullptr : &inputs);
  // The tracers stand for the inputs by identity only: let go of the first
  // call's arrays so the trace does not keep their buffers alive.
  for (auto& t : trace->tracers) {
    if (t.has_primitive() && !t.inputs().empty()) {
      t.inputs()[0] = array::uninitialized(t.shape(), t.dtype());
    }
  }
  return trace;
}

} // namespace

CapturedState random_state() {
  return {[] { return std::vector<array>{random::state().get()}; },
          [](const std::vector<array>& v) { random::state().set(v.at(0)); }};
}

Fn compile(Fn fun, CompileOptions options) {
  auto cf = std::make_shared<CompiledFunction>();
  cf->fun = std::move(fun);
  cf->options = std::move(options);
  return [cf](const std::vector<array>& args) {
    if (!compile_enabled()) return cf->fun(args);
    std::vector<size_t> counts;
    auto inputs = gather_inputs(*cf, args, counts);
    auto sig = signature(inputs, cf->options.shapeless);
    std::shared_ptr<detail::Trace> trace;
    {
      std::lock_guard<std::mutex> lock(cf->mutex);
      auto it = cf->traces.find(sig);
      if (it != cf->traces.end()) trace = it->second;
    }
    if (!trace) {
      trace = build_trace(*cf, inputs, args.size(), counts);
      std::lock_guard<std::mutex> lock(cf->mutex);
      cf->traces.emplace(sig, trace);
    }
    std::vector<array> outs;
    {
      detail::HostTimer timer("compile: replay");
      outs = detail::replay(*trace, inputs);
    }
    std::vector<array> user(outs.begin(),
                            outs.begin() + trace->num_user_outputs);
    size_t off = trace->num_user_outputs;
    for (size_t k = 0; k < cf->options.outputs.size(); ++k) {
      std::vector<array> part(outs.begin() + off,
                              outs.begin() + off + trace->state_counts[k]);
      cf->options.outputs[k].set(part);
      off += trace->state_counts[k];
    }
    return user;
  };
}

Fn compile(Fn fun, bool shapeless) {
  CompileOptions o;
  o.shapeless = shapeless;
  return compile(std::move(fun), std::move(o));
}

void disable_compile() { enabled_flag() = false; }
void enable_compile() { enabled_flag() = true; }
bool compile_enabled() { return enabled_flag().load(); }

void set_compile_stage(CompileStage stage, bool enabled) {
  (stage == CompileStage::simplify ? simplify_enabled : fuse_enabled) = enabled;
}

bool compile_stage_enabled(CompileStage stage) {
  return (stage == CompileStage::simplify ? simplify_enabled : fuse_enabled)
      .load();
}

std::string export_compiled_graph(const Fn& compiled,
                                  const std::vector<array>& inputs, bool dot) {
  // Trace afresh through the same pipeline (the cached trace is private to
  // the compiled function): wrap and capture the replayed graph.
  CompiledFunction cf;
  cf.fun = compiled;
  // compiled replays its trace on tracers; the structure we print is the
  // replayed graph, which is the trace after the passes.
  auto trace = build_trace(cf, inputs, inputs.size(), {});
  return detail::format_trace(*trace, dot);
}

std::vector<std::string> compile_log() { return detail::compile_log_lines(); }
void clear_compile_log() { detail::clear_compile_log_lines(); }

} // namespace kiln
