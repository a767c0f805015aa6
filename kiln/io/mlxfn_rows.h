// The rows of the import table (mlxfn_ops.cpp), shared with the files that
// add rows for more families (mlxfn_ops_linalg.cpp, mlxfn_ops_quantized.cpp).
// Internal to kiln/io.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/io/mlxfn_ops.h"

namespace kiln::detail::mlxfn {

using Builder = std::function<std::vector<array>(
    const State&, const std::vector<array>&, const NodeInfo&, Stream)>;

/** A primitive's parameter layout (schema's codes) and how kiln builds it. */
struct Row {
  const char* schema;
  Builder build;
};
using Rows = std::unordered_map<std::string, Row>;

/** Raises std::invalid_argument "[import_function] name: what". */
[[noreturn]] void bad(const std::string& name, const std::string& what);

/** Checks that the node has lo to hi inputs. */
void arity(const std::string& name, const std::vector<array>& in, size_t lo,
           size_t hi);

/** The rows of the linear algebra, FFT and matrix product families. */
void put_linalg_rows(Rows& t);
/** The rows of the quantization family. */
void put_quantized_rows(Rows& t);

} // namespace kiln::detail::mlxfn
