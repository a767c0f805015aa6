// A lazy graph as Graphviz DOT (declared in compile.h): one node per array
// (primitive nodes as boxes, inputs as ellipses), walked from the outputs
// through every array not yet evaluated.
#include <sstream>
#include <unordered_map>

#include "kiln/core/primitive.h"
#include "kiln/ops/utils.h"
#include "kiln/transforms/compile.h"
#include "kiln/transforms/graph_walk.h"

namespace kiln {

std::string graph_to_dot(
    const std::vector<array>& outputs,
    const std::vector<std::pair<std::string, array>>& names) {
  std::unordered_map<uintptr_t, std::string> label;
  for (auto& [n, a] : names) label.emplace(a.id(), n);
  std::unordered_map<uintptr_t, std::string> node;
  std::ostringstream os;
  os << "digraph {\n";
  auto name_of = [&](const array& a) {
    auto it = node.find(a.id());
    if (it != node.end()) return it->second;
    std::string n = "a" + std::to_string(node.size());
    node.emplace(a.id(), n);
    return n;
  };
  auto emit = [&](const array& a) {
    std::string n = name_of(a);
    auto it = label.find(a.id());
    std::string op = a.has_primitive() ? a.primitive().name() : "array";
    // A named array shows its name and, when it has one, its primitive.
    std::string text = it == label.end()        ? op
                       : a.has_primitive()     ? it->second + "\\n" + op
                                               : it->second;
    text += "\\n" + dtype_name(a.dtype()) + " " + detail::shape_str(a.shape());
    os << "  " << n << " [label=\"" << text
       << "\", shape=" << (a.has_primitive() ? "box" : "ellipse") << "];\n";
    if (!a.has_primitive()) return;
    for (auto& in : a.inputs()) {
      os << "  " << name_of(in) << " -> " << n << ";\n";
    }
  };
  // Arrays without a node (evaluated or constant) are leaves: emitted on
  // entry, their inputs never walked.
  detail::walk_graph(
      outputs,
      [&](const array& a) {
        if (node.count(a.id())) return false;
        if (a.has_primitive()) return true;
        emit(a);
        return false;
      },
      [&](const array& a) { emit(a); });
  os << "}\n";
  return os.str();
}

} // namespace kiln
