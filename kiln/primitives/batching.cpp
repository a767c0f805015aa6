#include "kiln/primitives/batching.h"

#include "kiln/ops/shape.h"

namespace kiln::detail {

array batch_first(const array& x, int axis, StreamOrDevice s) {
  return axis <= 0 ? x : moveaxis(x, axis, 0, s);
}

array to_batch_first(const array& x, int axis, int b) {
  if (axis >= 0) return batch_first(x, axis);
  return broadcast_to(expand_dims(x, 0), with_batch(b, x.shape()));
}

array batch_first_or_one(const array& x, int axis) {
  if (axis < 0) return expand_dims(x, 0);
  return batch_first(x, axis);
}

int batch_size(const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) return inputs[i].shape(axes[i]);
  }
  return 1;
}

Shape with_batch(int b, const Shape& shape) {
  Shape s = {b};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

} // namespace kiln::detail
