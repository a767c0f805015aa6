#include "kiln/transforms/compile_passes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <tuple>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "kiln/core/env.h"
#include "kiln/core/primitive.h"
#include "kiln/ops/utils.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/compiled.h"
#include "kiln/primitives/linalg.h"
#include "kiln/primitives/shape.h"
#include "kiln/transforms/trace.h"

namespace kiln::detail {

namespace {

// ---- simplify ---------------------------------------------------------------

// Equal available scalars merge into one (their bits and dtype match).
std::optional<std::pair<Dtype, uint64_t>> scalar_value(const array& a) {
  if (!a.is_available() || a.data_size() != 1 || a.size() == 0) {
    return std::nullopt;
  }
  uint64_t bits = 0;
  std::memcpy(&bits, a.data<char>(), a.itemsize());
  return std::make_pair(a.dtype(), bits);
}

void simplify(Trace& trace) {
  std::unordered_map<uintptr_t, array> canonical;
  std::map<std::tuple<int, uint64_t, Shape>, array> scalars;
  auto canon = [&](const array& a) -> array {
    auto it = canonical.find(a.id());
    if (it != canonical.end()) return it->second;
    // An available scalar, or a broadcast of one (what `x * 2` makes).
    const array* base = &a;
    if (a.has_primitive() && a.inputs().size() == 1 &&
        std::string(a.primitive().name()) == "Broadcast") {
      base = &a.inputs()[0];
    }
    if (!base->has_primitive()) {
      if (auto v = scalar_value(*base)) {
        auto key = std::make_tuple(static_cast<int>(v->first.val), v->second,
                                   a.shape());
        auto [s, inserted] = scalars.emplace(key, a);
        if (!inserted) return s->second;
      }
    }
    return a;
  };
  // Nodes with the same primitive (is_equivalent) on the same inputs merge.
  std::unordered_multimap<size_t, array> seen;
  std::vector<array> kept;
  size_t merged = 0;
  for (auto& node : trace.tape) {
    auto& inputs = node.inputs();
    size_t h = std::hash<std::string>()(node.primitive().name());
    for (auto& in : inputs) {
      in = canon(in);
      h = h * 31 + std::hash<uintptr_t>()(in.id());
    }
    bool dup = false;
    auto range = seen.equal_range(h);
    for (auto it = range.first; it != range.second && !dup; ++it) {
      const array& c = it->second;
      if (c.inputs().size() != inputs.size() ||
          c.outputs().size() != node.outputs().size() ||
          typeid(c.primitive()) != typeid(node.primitive()) ||
          !c.primitive().is_equivalent(node.primitive())) {
        continue;
      }
      bool same = true;
      for (size_t i = 0; i < inputs.size() && same; ++i) {
        same = c.inputs()[i].id() == inputs[i].id();
      }
      auto co = c.outputs(), no = node.outputs();
      for (size_t i = 0; i < co.size() && same; ++i) {
        same = co[i].shape() == no[i].shape() && co[i].dtype() == no[i].dtype();
      }
      if (!same) continue;
      for (size_t i = 0; i < co.size(); ++i)
        canonical.emplace(no[i].id(), co[i]);
      dup = true;
    }
    if (dup) {
      ++merged;
      continue;
    }
    seen.emplace(h, node);
    kept.push_back(node);
  }
  for (auto& o : trace.outputs) o = canon(o);
  trace.tape = std::move(kept);
  if (merged) {
    compile_log(2, "simplify: merged " + std::to_string(merged) +
                       " common subexpressions");
  }
}

// A transpose of the last two axes of a matrix product that nothing else
// consumes becomes the product of the transposed operands, (a b)^T = b^T a^T.
// The GEMM then writes the layout the consumers read (its operands'
// transposes are views it reads without copies) instead of a strided view
// every consumer gathers through. The gradient of a Linear weight is this
// case: x^T dy, transposed back to the weight's (out, in) shape, which
// AdamW's fused update would otherwise read column by column.
bool swaps_last_two_axes(const Transpose& t) {
  const auto& ax = t.axes();
  int n = static_cast<int>(ax.size());
  if (n < 2 || ax[n - 1] != n - 2 || ax[n - 2] != n - 1) return false;
  for (int i = 0; i < n - 2; ++i) {
    if (ax[i] != i) return false;
  }
  return true;
}

void transpose_products(Trace& trace) {
  std::unordered_map<uintptr_t, int> consumers;
  for (auto& node : trace.tape) {
    for (auto& in : node.inputs()) ++consumers[in.id()];
  }
  for (auto& o : trace.outputs) consumers[o.id()] += 2; // never rewritten
  std::unordered_map<uintptr_t, array> replaced;
  int rewrites = 0;
  for (auto& node : trace.tape) {
    for (auto& in : node.inputs()) {
      auto it = replaced.find(in.id());
      if (it != replaced.end()) in = it->second;
    }
    auto* t = dynamic_cast<const Transpose*>(&node.primitive());
    if (!t || !swaps_last_two_axes(*t)) continue;
    const array& product = node.inputs()[0];
    if (!product.has_primitive() || product.is_available() ||
        !dynamic_cast<const Matmul*>(&product.primitive()) ||
        consumers[product.id()] != 1 ||
        product.inputs()[0].ndim() != product.ndim() ||
        product.inputs()[1].ndim() != product.ndim()) {
      continue;
    }
    Stream s = product.primitive().stream();
    // The operands carry the product's batch axes (the op broadcasts
    // them), so the same permutation transposes each of them.
    const auto& ab = product.inputs();
    array rewritten(node.shape(), node.dtype(), std::make_shared<Matmul>(s),
                    {transpose(ab[1], t->axes(), s),
                     transpose(ab[0], t->axes(), s)});
    replaced.emplace(node.id(), rewritten);
    ++rewrites;
  }
  if (!rewrites) return;
  for (auto& o : trace.outputs) {
    auto it = replaced.find(o.id());
    if (it != replaced.end()) o = it->second;
  }
  trace.tape = trace_tape(trace.outputs, trace.tracers).nodes;
  compile_log(2, "simplify: " + std::to_string(rewrites) +
                     " transposed products written transposed by the GEMM");
}

// ---- fuse -------------------------------------------------------------------

bool fusable(const array& node) {
  auto k = node.primitive().fusion_kind();
  bool elementwise = k == FusionKind::unary || k == FusionKind::binary ||
                     k == FusionKind::ternary || k == FusionKind::cast;
  if (!elementwise || node.dtype() == complex64) return false;
  for (auto& in : node.inputs()) {
    if (in.dtype() == complex64) return false;
  }
  return true;
}

// A scalar known at trace time: an available one-element array, or a
// broadcast of one (what ops make of `x * 2`).
std::optional<FusedConstant> constant_of(const array& e, array& scalar) {
  array v = e;
  if (!e.is_available() && e.has_primitive() &&
      std::string(e.primitive().name()) == "Broadcast") {
    v = e.inputs()[0];
  }
  auto sv = scalar_value(v);
  if (!sv) return std::nullopt;
  scalar = v;
  return FusedConstant{sv->first, sv->second};
}

struct Region {
  std::vector<int> nodes; // tape indices, increasing
  int min_index;
};

class Fuser {
 public:
  explicit Fuser(Trace& trace) : trace_(trace), tape_(trace.tape) {
    for (int i = 0; i < static_cast<int>(tape_.size()); ++i) {
      for (auto& o : tape_[i].outputs()) index_[o.id()] = i;
      for (auto& in : tape_[i].inputs())
        consumers_[in.id()].push_back(tape_[i]);
    }
    for (auto& o : trace_.outputs) returned_.insert(o.id());
    region_of_.assign(tape_.size(), -1);
  }

  void run() {
    for (int i = 0; i < static_cast<int>(tape_.size()); ++i) {
      if (fusable(tape_[i])) {
        place(i);
      } else {
        explain_left_out(i);
      }
    }
    int fused = 0;
    for (auto& r : regions_) {
      if (r.nodes.size() >= 2) {
        replace(r);
        ++fused;
      }
    }
    if (fused) {
      // Rewiring changed who consumes what: order the tape afresh.
      trace_.tape = trace_tape(trace_.outputs, trace_.tracers).nodes;
    }
  }

 private:
  int tape_index(const array& a) const {
    auto it = index_.find(a.id());
    return it == index_.end() ? -1 : it->second;
  }

  // Whether node index j depends on region r once every region is
  // contracted to one node (whose outputs depend on all of its inputs):
  // merging r with a consumer of j would then form a cycle. Nothing that
  // ends before min_index (r's first node) can depend on r.
  bool depends_on(int j, int r, int min_index) {
    std::vector<int> stack = {j};
    std::unordered_set<int> seen, seen_regions;
    auto push_inputs = [&](int k) {
      for (auto& in : tape_[k].inputs()) {
        int t = tape_index(in);
        if (t >= 0) stack.push_back(t);
      }
    };
    while (!stack.empty()) {
      int k = stack.back();
      stack.pop_back();
      if (!seen.insert(k).second) continue;
      int rk = region_of_[k];
      if (rk == r) return true;
      if (rk >= 0) {
        auto& members = regions_[rk].nodes;
        if (members.back() < min_index || !seen_regions.insert(rk).second) {
          continue;
        }
        for (int m : members) push_inputs(m);
      } else if (k >= min_index) {
        push_inputs(k);
      }
    }
    return false;
  }

  // Why a node next to elementwise work stays outside every region.
  void explain_left_out(int i) {
    const array& node = tape_[i];
    bool near = false;
    for (auto& in : node.inputs()) {
      int j = tape_index(in);
      near |= j >= 0 && fusable(tape_[j]);
    }
    if (!near) return;
    auto k = node.primitive().fusion_kind();
    std::string why = k == FusionKind::broadcast
        ? "a broadcast stays a view (a region never ends in one)"
        : k == FusionKind::none ? "not elementwise"
                                : "complex64 is not fused";
    compile_log(1, std::string("left out ") + node.primitive().name() + ": " +
                       why);
  }

  void place(int i) {
    const array& node = tape_[i];
    // Candidate: the region of a fusable input with the same shape; take the
    // one whose other inputs make no cycle.
    int chosen = -1;
    for (auto& in : node.inputs()) {
      int j = tape_index(in);
      if (j < 0 || region_of_[j] < 0 || in.shape() != node.shape()) continue;
      if (tape_[j].primitive().stream() != node.primitive().stream()) continue;
      int r = region_of_[j];
      if (chosen == r) continue;
      Region& reg = regions_[r];
      if (static_cast<int>(reg.nodes.size()) >= max_fused_ops) continue;
      bool ok = true;
      for (auto& other : node.inputs()) {
        int k = tape_index(other);
        if (k >= 0 && region_of_[k] != r && depends_on(k, r, reg.min_index)) {
          ok = false;
          break;
        }
      }
      if (ok && external_inputs(reg, i) <= max_fused_inputs) {
        chosen = r;
        break;
      }
    }
    if (chosen < 0) {
      if (node.inputs().size() > 0 && env::debug_level() >= 2) {
        compile_log(2, std::string("new region at ") + node.primitive().name() +
                           ": no input region of the same shape and stream "
                           "could take it without a cycle or passing the "
                           "size limits");
      }
      regions_.push_back({{i}, i});
      region_of_[i] = static_cast<int>(regions_.size()) - 1;
    } else {
      regions_[chosen].nodes.push_back(i);
      region_of_[i] = chosen;
      // Other input regions of the same shape join too when that makes no
      // cycle, so trees of elementwise ops become one region, not several.
      for (auto& in : node.inputs()) {
        int j = tape_index(in);
        if (j < 0 || region_of_[j] < 0 || region_of_[j] == chosen) continue;
        if (in.shape() != node.shape() ||
            tape_[j].primitive().stream() != node.primitive().stream()) {
          continue;
        }
        try_merge(chosen, region_of_[j]);
      }
    }
  }

  // External input nodes (on the tape) of region r, excluding region skip.
  std::vector<int> external_nodes(int r, int skip) {
    std::vector<int> out;
    for (int n : regions_[r].nodes) {
      for (auto& in : tape_[n].inputs()) {
        int k = tape_index(in);
        if (k >= 0 && region_of_[k] != r && region_of_[k] != skip) {
          out.push_back(k);
        }
      }
    }
    return out;
  }

  // Merge region b into region a unless that would form a cycle (some input
  // of one depends on the other) or pass the size limits.
  void try_merge(int a, int b) {
    Region& ra = regions_[a];
    Region& rb = regions_[b];
    if (static_cast<int>(ra.nodes.size() + rb.nodes.size()) > max_fused_ops) {
      return;
    }
    for (int k : external_nodes(b, a)) {
      if (depends_on(k, a, ra.min_index)) return;
    }
    for (int k : external_nodes(a, b)) {
      if (depends_on(k, b, rb.min_index)) return;
    }
    std::unordered_set<uintptr_t> ext;
    for (int r : {a, b}) {
      for (int n : regions_[r].nodes) {
        for (auto& in : tape_[n].inputs()) {
          int k = tape_index(in);
          if (k < 0 || (region_of_[k] != a && region_of_[k] != b)) {
            ext.insert(in.id());
          }
        }
      }
    }
    if (static_cast<int>(ext.size()) > max_fused_inputs) return;
    for (int n : rb.nodes) region_of_[n] = a;
    ra.nodes.insert(ra.nodes.end(), rb.nodes.begin(), rb.nodes.end());
    std::sort(ra.nodes.begin(), ra.nodes.end());
    ra.min_index = std::min(ra.min_index, rb.min_index);
    rb.nodes.clear();
  }

  // Number of distinct external inputs of region r if node i joined it.
  int external_inputs(const Region& r, int i) {
    std::unordered_set<uintptr_t> ext;
    auto count = [&](int n) {
      for (auto& in : tape_[n].inputs()) {
        int k = tape_index(in);
        bool inside = (k >= 0 && (k == i || (region_of_[k] >= 0 &&
                                             &regions_[region_of_[k]] == &r)));
        if (!inside) ext.insert(in.id());
      }
    };
    for (int n : r.nodes) count(n);
    count(i);
    return static_cast<int>(ext.size());
  }

  void replace(const Region& r) {
    std::unordered_map<uintptr_t, int> op_of; // output id -> op index
    std::unordered_map<uintptr_t, int> ext_of; // external input id -> index
    std::vector<array> ext;
    std::vector<std::optional<FusedConstant>> constants;
    std::vector<FusedOp> ops;
    std::unordered_set<int> members(r.nodes.begin(), r.nodes.end());
    for (int n : r.nodes) {
      const array& node = tape_[n];
      FusedOp op{node.primitive_ptr(), {}, node.dtype()};
      for (auto& in : node.inputs()) {
        auto it = op_of.find(in.id());
        if (it != op_of.end()) {
          op.args.push_back(it->second);
          continue;
        }
        auto e = ext_of.find(in.id());
        if (e == ext_of.end()) {
          array scalar = in;
          auto c = constant_of(in, scalar);
          e = ext_of.emplace(in.id(), static_cast<int>(ext.size())).first;
          ext.push_back(c ? scalar : in);
          constants.push_back(c);
        }
        op.args.push_back(-e->second - 1);
      }
      op_of[node.id()] = static_cast<int>(ops.size());
      ops.push_back(std::move(op));
    }
    // Outputs: members used outside the region or returned. A value keeps
    // its consumers through earlier replacements (they are renamed, and a
    // fused node consumes what its region's members did), so the graph's
    // consumer lists answer this without scanning the tape per region.
    auto outside = [&](const array& c) {
      auto it = index_.find(c.id());
      return it == index_.end() || !members.count(it->second);
    };
    std::vector<int> out_ops;
    std::vector<array> originals;
    for (int n : r.nodes) {
      uintptr_t id = tape_[n].id();
      bool used = returned_.count(id) > 0;
      auto c = consumers_.find(id);
      if (!used && c != consumers_.end()) {
        used = std::any_of(c->second.begin(), c->second.end(), outside);
      }
      if (used) {
        out_ops.push_back(op_of[id]);
        originals.push_back(tape_[n]);
      }
    }
    auto p = std::make_shared<Compiled>(tape_[r.nodes[0]].primitive().stream(),
                                        std::move(ops), out_ops,
                                        std::move(constants));
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (auto& o : originals) {
      shapes.push_back(o.shape());
      dtypes.push_back(o.dtype());
    }
    auto outs = array::make_arrays(shapes, dtypes, p, ext);
    for (auto& o : outs) o.set_tracer(true);
    // Consumers outside the region now read the fused node's outputs.
    for (size_t k = 0; k < outs.size(); ++k) {
      uintptr_t from = originals[k].id();
      auto c = consumers_.find(from);
      if (c != consumers_.end()) {
        std::vector<array> moved;
        for (auto& user : c->second) {
          if (!outside(user)) continue;
          for (auto& in : user.inputs()) {
            if (in.id() == from) in = outs[k];
          }
          moved.push_back(user);
        }
        auto& to = consumers_[outs[k].id()];
        to.insert(to.end(), moved.begin(), moved.end());
      }
      if (returned_.count(from)) {
        for (auto& o : trace_.outputs) {
          if (o.id() == from) o = outs[k];
        }
        returned_.insert(outs[k].id());
      }
    }
    for (auto& e : ext) consumers_[e.id()].push_back(outs[0]);
    created_.push_back(outs[0]);
    std::ostringstream os;
    p->print(os);
    compile_log(1, "fused " + os.str() + ": " +
                       std::to_string(p->ops().size()) + " ops, " +
                       std::to_string(ext.size()) + " inputs, " +
                       std::to_string(outs.size()) + " outputs");
  }

  Trace& trace_;
  std::vector<array> tape_;
  std::unordered_map<uintptr_t, int> index_;
  std::vector<int> region_of_;
  std::vector<Region> regions_;
  std::vector<array> created_; // one output of each Compiled node made
  // Each value's consumers (tape nodes, then fused nodes as they are made)
  // and the values the trace returns.
  std::unordered_map<uintptr_t, std::vector<array>> consumers_;
  std::unordered_set<uintptr_t> returned_;
};

bool is_implicit_broadcast(const array& node) {
  auto* b = dynamic_cast<const Broadcast*>(&node.primitive());
  return b && b->implicit();
}

void check_shapeless(const Trace& trace) {
  for (auto& node : trace.tape) {
    // Replay gives these the shape their consumer needs.
    if (is_implicit_broadcast(node)) continue;
    try {
      node.primitive().output_shapes(node.inputs());
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument(
          std::string("[compile] ") + node.primitive().name() +
          " cannot infer its output shape from new input shapes, so the "
          "function cannot be compiled with shapeless=true.");
    }
  }
}

} // namespace

void run_passes(Trace& trace, bool simplify_on, bool fuse_on,
                const std::vector<array>* refused) {
  Tape tape = trace_tape(trace.outputs, trace.tracers);
  // The replay would not see such an array change (MLX refuses the same).
  for (size_t i = 0; refused && i < refused->size(); ++i) {
    if (tape.depends.count((*refused)[i].id())) {
      throw std::invalid_argument(
          "[compile] the function reaches one of its inputs through a "
          "captured array instead of its argument (uncaptured inputs are "
          "not allowed): use the argument, or pass the array as captured "
          "state (inputs=).");
    }
  }
  trace.tape = std::move(tape.nodes);
  if (simplify_on) {
    simplify(trace);
    transpose_products(trace);
  }
  if (fuse_on) Fuser(trace).run();
  if (trace.shapeless) check_shapeless(trace);
  plan_replay(trace);
}

namespace {

bool broadcasts_its_operands(const Primitive& p) {
  auto k = p.fusion_kind();
  return k == FusionKind::unary || k == FusionKind::binary ||
         k == FusionKind::ternary || dynamic_cast<const Compiled*>(&p);
}

} // namespace

void plan_replay(Trace& trace) {
  if (trace.shapeless) return;
  auto plan = std::make_shared<ReplayPlan>();
  std::unordered_map<uintptr_t, int> slot_of;
  for (auto& t : trace.tracers) slot_of.emplace(t.id(), plan->slots++);
  plan->inputs = plan->slots;
  std::unordered_map<uintptr_t, int> constant_of;
  auto operand = [&](const array& a) {
    auto it = slot_of.find(a.id());
    if (it != slot_of.end()) return it->second;
    auto [c, added] = constant_of.emplace(
        a.id(), static_cast<int>(plan->constants.size()));
    if (added) plan->constants.push_back(a);
    return -1 - c->second;
  };
  plan->nodes.reserve(trace.tape.size());
  for (auto& node : trace.tape) {
    ReplayPlan::Node n;
    n.primitive = node.primitive_ptr();
    for (auto& x : node.inputs()) n.operands.push_back(operand(x));
    for (auto& o : node.outputs()) {
      n.shapes.push_back(o.shape());
      n.dtypes.push_back(o.dtype());
      slot_of.emplace(o.id(), plan->slots++);
    }
    plan->nodes.push_back(std::move(n));
  }
  for (auto& o : trace.outputs) plan->outputs.push_back(operand(o));
  trace.plan = std::move(plan);
}

namespace {

std::vector<array> replay_plan(const ReplayPlan& plan,
                               const std::vector<array>& inputs) {
  // Kept across calls (emptied, not freed): a fresh vector of a large
  // graph's slots is an allocation past glibc's small sizes, and each one
  // made malloc consolidate every small block the previous call's graph
  // had freed, about an eighth of a replay's time.
  thread_local std::vector<array> slots;
  slots.clear();
  slots.reserve(plan.slots);
  struct Clear {
    std::vector<array>& v;
    ~Clear() { v.clear(); }
  } clear_at_exit{slots};
  for (int i = 0; i < plan.inputs; ++i) slots.push_back(inputs[i]);
  auto value = [&](int operand) -> const array& {
    return operand >= 0 ? slots[operand] : plan.constants[-1 - operand];
  };
  for (auto& n : plan.nodes) {
    std::vector<array> in;
    in.reserve(n.operands.size());
    for (int k : n.operands) in.push_back(value(k));
    if (n.shapes.size() == 1) {
      slots.push_back(
          array(n.shapes[0], n.dtypes[0], n.primitive, std::move(in)));
    } else {
      for (auto& a : array::make_arrays(n.shapes, n.dtypes, n.primitive, in)) {
        slots.push_back(std::move(a));
      }
    }
  }
  std::vector<array> result;
  result.reserve(plan.outputs.size());
  for (int k : plan.outputs) result.push_back(value(k));
  return result;
}

} // namespace

std::vector<array> replay(const Trace& trace,
                          const std::vector<array>& inputs) {
  if (trace.plan) return replay_plan(*trace.plan, inputs);
  std::unordered_map<uintptr_t, array> value;
  value.reserve(trace.tape.size() * 2 + inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    value.emplace(trace.tracers[i].id(), inputs[i]);
  }
  // Shapeless: an implicit broadcast (an elementwise op lining up its
  // operands) is not replayed with the shape it had at trace time. Its
  // operand waits here until the consumer is known, and is then broadcast
  // against the consumer's other operands, as the op would have done.
  std::unordered_map<uintptr_t, std::pair<array, Shape>> pending;
  auto lookup = [&](const array& a) {
    auto it = value.find(a.id());
    return it == value.end() ? a : it->second;
  };
  // The operand of an implicit broadcast to re-broadcast: one on the tape
  // (pending), or one of a constant (the scalar of `x * 2`, which depends
  // on no input and so is not on the tape).
  auto deferred =
      [&](const array& a) -> std::optional<std::pair<array, Shape>> {
    if (!trace.shapeless) return std::nullopt;
    auto it = pending.find(a.id());
    if (it != pending.end()) return it->second;
    if (!value.count(a.id()) && a.has_primitive() && is_implicit_broadcast(a)) {
      return std::make_pair(lookup(a.inputs()[0]), a.shape());
    }
    return std::nullopt;
  };
  auto resolve = [&](const array& a, const Shape* target) -> array {
    auto d = deferred(a);
    if (!d) return lookup(a);
    // Implicit again, so a transformation or replay of this graph (a
    // compiled function called inside another shapeless one) can move it.
    return detail::broadcast_operand(d->first, target ? *target : d->second);
  };
  for (auto& node : trace.tape) {
    if (trace.shapeless && is_implicit_broadcast(node)) {
      auto& b = static_cast<const Broadcast&>(node.primitive());
      pending.emplace(node.id(),
                      std::make_pair(lookup(node.inputs()[0]), b.shape()));
      continue;
    }
    std::vector<array> in;
    in.reserve(node.inputs().size());
    if (trace.shapeless && broadcasts_its_operands(node.primitive())) {
      Shape target;
      for (auto& x : node.inputs()) {
        auto d = deferred(x);
        const Shape& xs = d ? d->first.shape() : lookup(x).shape();
        target = detail::broadcast_shapes(target, xs, node.primitive().name());
      }
      for (auto& x : node.inputs()) in.push_back(resolve(x, &target));
    } else {
      for (auto& x : node.inputs()) in.push_back(resolve(x, nullptr));
    }
    auto outs = node.outputs();
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    if (trace.shapeless) {
      shapes = node.primitive().output_shapes(in);
    }
    for (auto& o : outs) {
      if (!trace.shapeless) shapes.push_back(o.shape());
      dtypes.push_back(o.dtype());
    }
    std::vector<array> made;
    if (outs.size() == 1) {
      made.push_back(
          array(shapes[0], dtypes[0], node.primitive_ptr(), std::move(in)));
    } else {
      made = array::make_arrays(shapes, dtypes, node.primitive_ptr(), in);
    }
    for (size_t k = 0; k < outs.size(); ++k)
      value.emplace(outs[k].id(), made[k]);
  }
  std::vector<array> result;
  for (auto& o : trace.outputs) result.push_back(resolve(o, nullptr));
  return result;
}

std::string format_trace(const Trace& trace, bool dot) {
  std::unordered_map<uintptr_t, std::string> names;
  int next = 0;
  auto name_of = [&](const array& a) {
    auto it = names.find(a.id());
    if (it != names.end()) return it->second;
    std::string n = (a.has_primitive() ? "t" : "c") + std::to_string(next++);
    names.emplace(a.id(), n);
    return n;
  };
  for (size_t i = 0; i < trace.tracers.size(); ++i) {
    names.emplace(trace.tracers[i].id(), "in" + std::to_string(i));
  }
  std::ostringstream os;
  if (dot) os << "digraph kiln {\n";
  for (auto& node : trace.tape) {
    auto outs = node.outputs();
    std::ostringstream prim;
    node.primitive().print(prim);
    if (dot) {
      for (auto& o : outs) {
        os << "  \"" << name_of(o) << "\" [label=\"" << prim.str() << "\"];\n";
        for (auto& in : node.inputs()) {
          os << "  \"" << name_of(in) << "\" -> \"" << name_of(o) << "\";\n";
        }
      }
      continue;
    }
    for (size_t k = 0; k < outs.size(); ++k)
      os << (k ? ", " : "") << name_of(outs[k]);
    os << " = " << prim.str() << "(";
    for (size_t k = 0; k < node.inputs().size(); ++k) {
      os << (k ? ", " : "") << name_of(node.inputs()[k]);
    }
    os << ") " << shape_str(outs[0].shape()) << " "
       << dtype_name(outs[0].dtype()) << "\n";
  }
  if (dot) {
    os << "}\n";
  } else {
    os << "outputs:";
    for (auto& o : trace.outputs) os << " " << name_of(o);
    os << "\n";
  }
  return os.str();
}

} // namespace kiln::detail
