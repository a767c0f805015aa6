// export_graph: a traced function as records, for an export callback.
#include <unordered_map>

#include "kiln/io/export_trace.h"
#include "kiln/io/function_export.h"
#include "kiln/io/mlxfn_ops.h"

namespace kiln {

ExportedGraph export_graph(const ExportedFn& fun, const Args& args,
                           const Kwargs& kwargs, bool shapeless) {
  auto t = detail::trace_for_export(fun, args, kwargs, shapeless);
  std::unordered_map<uintptr_t, std::string> names;
  auto name_of = [&](const array& a) {
    auto it = names.find(a.id());
    if (it != names.end()) return it->second;
    std::string n;
    for (size_t k = names.size() + 1; k > 0; k = (k - 1) / 26) {
      n.insert(n.begin(), char('A' + (k - 1) % 26));
    }
    names.emplace(a.id(), n);
    return n;
  };
  auto described = [&](const std::vector<array>& v) {
    std::vector<ExportedArray> out;
    for (auto& a : v) out.push_back({name_of(a), a.shape(), a.dtype()});
    return out;
  };
  ExportedGraph g;
  g.inputs = described(t.tracers);
  size_t first_kw = args.size();
  for (auto& [k, v] : kwargs)
    g.keyword_inputs.emplace_back(k, name_of(t.tracers[first_kw++]));
  g.outputs = described(t.outputs);
  for (auto& c : t.constants) g.constants.emplace_back(name_of(c), c);
  for (auto& n : t.tape) {
    if (auto value = detail::mlxfn::folded(n, shapeless)) {
      g.constants.emplace_back(name_of(n), *value);
      continue;
    }
    auto inputs = detail::mlxfn::operands(n);
    for (auto& x : inputs) {
      // A constant the MLX node takes that kiln's does not.
      if (!x.has_primitive() && !names.count(x.id())) {
        g.constants.emplace_back(name_of(x), x);
      }
    }
    auto [name, state] = detail::mlxfn::describe(n, shapeless);
    ExportedPrimitive p{name, described(inputs), described(n.outputs()), {}};
    const char* schema = detail::mlxfn::schema(name);
    for (size_t k = 0; schema[k]; ++k) {
      const auto& v = state.at(k);
      switch (schema[k]) {
        case 'n': break;
        case 'b': p.arguments.emplace_back(v.i != 0); break;
        case 'f':
        case 'd': p.arguments.emplace_back(v.f); break;
        case 'D': p.arguments.emplace_back(v.dt); break;
        case 's': p.arguments.emplace_back(v.s); break;
        case 'S':
        case 'L': p.arguments.emplace_back(v.v); break;
        default: p.arguments.emplace_back(v.i); break;
      }
    }
    g.primitives.push_back(std::move(p));
  }
  return g;
}

} // namespace kiln
