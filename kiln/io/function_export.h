// Function export: a traced function written to a file (MLX's .mlxfn
// layout) and read back as a callable, from Python or C++, with no Python
// needed to run it.
//
// The file holds one or more traces of a function (one per input
// signature), each a tape of primitives named as MLX names them with their
// parameters in MLX's byte layout, so a file MLX exports runs on kiln and
// one kiln exports runs on MLX, as long as every primitive on the tape has
// an MLX counterpart. kiln's own primitives without one are written under
// "kiln." names, which only kiln reads. Constants are stored once per file.
#pragma once

#include <functional>
#include <utility>
#include <variant>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/core/array.h"

namespace kiln {

using Args = std::vector<array>;
using Kwargs = std::map<std::string, array>;
using ExportedFn =
    std::function<std::vector<array>(const Args&, const Kwargs&)>;

namespace detail {
struct ExportFile;
struct ImportTable;
} // namespace detail

/** Writes traces of one function to a file: each call traces the function
 *  on new example inputs (a signature not exported before) and rewrites the
 *  file with every trace so far. */
class FunctionExporter {
 public:
  FunctionExporter(std::string file, ExportedFn fun, bool shapeless,
                   std::string metadata);
  void operator()(const Args& args, const Kwargs& kwargs = {});
  /** No more traces: a later call raises. */
  void close();

 private:
  std::shared_ptr<detail::ExportFile> file_;
  ExportedFn fun_;
  bool closed_ = false;
};

FunctionExporter exporter(const std::string& file, ExportedFn fun,
                          bool shapeless = false,
                          const std::string& metadata = "");

void export_function(const std::string& file, ExportedFn fun,
                     const Args& args, const Kwargs& kwargs = {},
                     bool shapeless = false, const std::string& metadata = "");

/** A traced function as records, for an export callback (MLX's callback
 *  form): its inputs, keyword inputs (name, input), outputs, constants and
 *  each primitive with its MLX name and parameters. Values are named by
 *  letters (A, B, ..., AA, ...). */
struct ExportedArray {
  std::string name;
  Shape shape;
  Dtype dtype;
};
/** A parameter: an integer, a flag, a real, a list of integers, a dtype. */
using ExportedArgument =
    std::variant<int64_t, bool, double, std::vector<int64_t>, Dtype,
                 std::string>;
struct ExportedPrimitive {
  std::string name;
  std::vector<ExportedArray> inputs, outputs;
  std::vector<ExportedArgument> arguments;
};
struct ExportedGraph {
  std::vector<ExportedArray> inputs;
  std::vector<std::pair<std::string, std::string>> keyword_inputs;
  std::vector<ExportedArray> outputs;
  std::vector<std::pair<std::string, array>> constants;
  std::vector<ExportedPrimitive> primitives;
};
ExportedGraph export_graph(const ExportedFn& fun, const Args& args,
                           const Kwargs& kwargs = {}, bool shapeless = false);

/** A function read back: calling it picks the trace whose signature (the
 *  count of positional inputs, the keyword names, and each input's dtype,
 *  rank and, unless shapeless, shape) matches, and builds its graph on the
 *  given inputs. */
class ImportedFunction {
 public:
  explicit ImportedFunction(const std::string& file);
  std::vector<array> operator()(const Args& args,
                                const Kwargs& kwargs = {}) const;
  const std::string& metadata() const;

 private:
  std::shared_ptr<detail::ImportTable> table_;
};

ImportedFunction import_function(const std::string& file);

} // namespace kiln
