// The primitives of an exported function as MLX's .mlxfn layout names
// them: one table row per MLX primitive (its parameters' layout and how
// kiln builds it), and per kiln primitive the row it is written as.
// Internal to function_export.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::detail::mlxfn {

/** One parameter of a primitive: an integer (ints, enums, bools), a real,
 *  a list of integers (shapes, axes, strides), a dtype or a string. */
struct Value {
  enum Kind { integer, real, list, dtype, text } kind = integer;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> v;
  Dtype dt = float32;
  std::string s;
};
using State = std::vector<Value>;

// Parameters as the tables write them.
inline Value integer(int64_t i) {
  Value v;
  v.i = i;
  return v;
}
inline Value real(double f) {
  Value v;
  v.kind = Value::real;
  v.f = f;
  return v;
}
template <typename T>
Value list(const std::vector<T>& xs) {
  Value v;
  v.kind = Value::list;
  v.v.assign(xs.begin(), xs.end());
  return v;
}
inline Value dtype_value(Dtype d) {
  Value v;
  v.kind = Value::dtype;
  v.dt = d;
  return v;
}
inline Value text(std::string s) {
  Value v;
  v.kind = Value::text;
  v.s = std::move(s);
  return v;
}


/** How the primitive's parameters are laid out, one code per parameter:
 *  i int32, b bool, f float32, d float64, u uint64, D dtype, S list of
 *  int32, L list of int64 (or of uint64, the same bytes), s string; n
 *  stands for MLX's empty placeholder (no bytes). */
const char* schema(const std::string& mlx_name);

/** What a node recorded in the file: its output shapes and dtypes. */
struct NodeInfo {
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  bool shapeless = false;
};

/** The node's outputs built on `inputs` by kiln; raises naming the
 *  primitive when kiln has no such primitive or the inputs do not fit. */
std::vector<array> build(const std::string& mlx_name, const State& state,
                         const std::vector<array>& inputs,
                         const NodeInfo& info, Stream s);

/** The MLX name and parameters kiln writes for node's primitive; raises
 *  naming the primitive when it cannot be exported. */
std::pair<std::string, State> describe(const array& node, bool shapeless);

/** The inputs of the MLX node written for node: its own, or where MLX's
 *  primitive takes one kiln's has not (gather_qmm's picks read in place
 *  have no left indices), with that input made as a constant. */
std::vector<array> operands(const array& node);

/** The value node is written as, a constant, where MLX has no primitive
 *  for it but it depends on its inputs' shapes only, which a trace that is
 *  not shapeless fixes (a count of elements less ddof). */
std::optional<array> folded(const array& node, bool shapeless);

} // namespace kiln::detail::mlxfn
