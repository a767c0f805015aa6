// depends: order evaluation without changing values.
#include "kiln/primitives/custom.h"
#include "kiln/transforms/eval.h"

namespace kiln {

std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies) {
  if (inputs.empty()) return {};
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (auto& x : inputs) {
    shapes.push_back(x.shape());
    dtypes.push_back(x.dtype());
  }
  std::vector<array> all = inputs;
  all.insert(all.end(), dependencies.begin(), dependencies.end());
  auto p =
      std::make_shared<Depends>(to_stream({}), static_cast<int>(inputs.size()));
  return array::make_arrays(std::move(shapes), dtypes, p, all);
}

} // namespace kiln
