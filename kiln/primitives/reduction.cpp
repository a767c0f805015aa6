#include "kiln/primitives/reduction.h"

#include <algorithm>

namespace kiln {

const char* Reduce::name() const {
  static const char* names[] = {"ReduceAnd", "ReduceOr",  "ReduceSum",
                                "ReduceProd", "ReduceMax", "ReduceMin"};
  return names[type_];
}

std::vector<Shape> Reduce::output_shapes(const std::vector<array>& inputs) {
  Shape s = inputs[0].shape();
  for (int ax : axes_) s[ax] = 1;
  return {s};
}

std::vector<Shape> ArgReduce::output_shapes(const std::vector<array>& inputs) {
  Shape s = inputs[0].shape();
  s[axis_] = 1;
  return {s};
}

const char* Scan::name() const {
  static const char* names[] = {"CumSum", "CumProd", "CumMax", "CumMin",
                                "CumLogSumExp"};
  return names[type_];
}

Dtype sum_dtype(Dtype d) {
  if (d == bool_ || d == int8 || d == int16 || d == int32) return int32;
  if (d == uint8 || d == uint16 || d == uint32) return uint32;
  return d;
}

double NumberOfElements::count(const Shape& shape) const {
  double n = 1;
  for (int x : axes_) n *= shape[x];
  return std::max(n - ddof_, 0.0);
}

} // namespace kiln
