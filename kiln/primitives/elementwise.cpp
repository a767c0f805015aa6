#include "kiln/primitives/elementwise.h"

#include <stdexcept>

#include "kiln/ops/utils.h"

namespace kiln {

// Ops broadcast before they build the node, so the operands of an
// elementwise primitive have one shape. compile's shapeless replay can hand
// it others (an input whose shape changed next to a captured array); that is
// an error, never a kernel reading past an operand.
std::vector<Shape> Elementwise::output_shapes(
    const std::vector<array>& inputs) {
  for (auto& in : inputs) {
    if (in.shape() != inputs[0].shape()) {
      std::string shapes;
      for (auto& x : inputs)
        shapes +=
            (shapes.empty() ? "" : " and ") + detail::shape_str(x.shape());
      throw std::invalid_argument(std::string("[") + name() +
                                  "] operands of shapes " + shapes +
                                  " do not have one shape.");
    }
  }
  return {inputs[0].shape()};
}

} // namespace kiln
