#include "kiln/primitives/index_grad_utils.h"

#include <algorithm>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/reduction.h"

namespace kiln::detail {

array batch_index(const Shape& shape) {
  Shape column(shape.size(), 1);
  column[0] = shape[0];
  return broadcast_to(reshape(arange(0, shape[0], 1), column), shape);
}

namespace {

// The extent of src along axis as an int64 scalar: a constant, or, while a
// shapeless compile traces src, a node that follows src's shape on replay.
array axis_size(const array& src, int axis) {
  if (!shape_follows_replay(src)) {
    return array(int64_t{src.shape(axis)});
  }
  auto p = std::make_shared<NumberOfElements>(to_stream({}),
                                              std::vector<int>{axis}, 0, int64);
  return array(Shape{}, int64, std::move(p), {src});
}

array wrapped(const array& idx, const array& dim) {
  auto v = astype(idx, int64);
  return where(v < int64_t{0}, add(v, dim), v);
}

} // namespace

array clamped_starts(const array& idx, const array& src, int axis, int size) {
  auto dim = axis_size(src, axis);
  auto hi = maximum(subtract(dim, array(int64_t{size})), array(int64_t{0}));
  return clip(wrapped(idx, dim), array(int64_t{0}), hi);
}

array starts_in_range(const array& idx, const array& src, int axis,
                      int size) {
  auto dim = axis_size(src, axis);
  auto v = wrapped(idx, dim);
  return logical_and(v >= int64_t{0},
                     less_equal(v, subtract(dim, array(int64_t{size}))));
}

array element_ids(const Shape& shape) {
  size_t n = shape_size(shape);
  if (n < (size_t{1} << 31)) {
    return reshape(arange(0, static_cast<int>(n), 1), shape);
  }
  return reshape(arange(0.0, static_cast<double>(n), 1.0, int64), shape);
}

array tangent_of(int i, const std::vector<array>& primals,
                 const std::vector<array>& tangents,
                 const std::vector<int>& argnums) {
  auto it = std::find(argnums.begin(), argnums.end(), i);
  if (it == argnums.end()) return zeros_like(primals[i]);
  return tangents[it - argnums.begin()];
}

} // namespace kiln::detail
