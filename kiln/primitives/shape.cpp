#include <string>
#include "kiln/primitives/shape.h"

#include <algorithm>
#include <stdexcept>

#include "kiln/ops/utils.h"

namespace kiln {

bool Broadcast::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Broadcast*>(&other);
  return o && o->shape_ == shape_ && o->implicit_ == implicit_;
}

std::vector<Shape> Broadcast::output_shapes(const std::vector<array>& inputs) {
  // An explicit broadcast_to keeps its target shape; the new input must
  // still broadcast to it.
  if (detail::broadcast_shapes(inputs[0].shape(), shape_, "broadcast_to") !=
      shape_) {
    throw std::invalid_argument(
        "[broadcast_to] cannot broadcast an array of shape " +
        detail::shape_str(inputs[0].shape()) + " to shape " +
        detail::shape_str(shape_) + ".");
  }
  return {shape_};
}

std::vector<Shape> BroadcastLike::output_shapes(
    const std::vector<array>& inputs) {
  const Shape& in = inputs[0].shape();
  const Shape& like = inputs[1].shape();
  if (keep_ > 0) {
    size_t k = static_cast<size_t>(keep_);
    if (in.size() < k || like.size() < k) {
      throw std::invalid_argument(
          "[broadcast_to] batch axes of arrays of shapes " +
          detail::shape_str(in) + " and " + detail::shape_str(like) +
          ": both need at least " + std::to_string(k) + " axes.");
    }
    Shape out = detail::broadcast_shapes(Shape(in.begin(), in.end() - k),
                                         Shape(like.begin(), like.end() - k),
                                         "broadcast_to");
    out.insert(out.end(), in.end() - k, in.end());
    return {out};
  }
  if (in.size() > like.size() ||
      detail::broadcast_shapes(in, like, "broadcast_to") != like) {
    throw std::invalid_argument(
        "[broadcast_to] cannot broadcast an array of shape " +
        detail::shape_str(in) + " to shape " + detail::shape_str(like) + ".");
  }
  return {like};
}

bool Reshape::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Reshape*>(&other);
  return o && o->shape_ == shape_ && o->requested_ == requested_;
}

std::vector<Shape> Reshape::output_shapes(const std::vector<array>& inputs) {
  const array& in = inputs[0];
  if (inputs.size() == 2) {
    const Shape& like = inputs[1].shape();
    if (shape_size(like) != in.size()) {
      throw std::invalid_argument(
          "[reshape] cannot reshape an array of shape " +
          detail::shape_str(in.shape()) + " into shape " +
          detail::shape_str(like) + ".");
    }
    return {like};
  }
  auto infer = std::find(requested_.begin(), requested_.end(), -1);
  if (infer == requested_.end()) {
    if (in.shape() != in_shape_) {
      throw std::invalid_argument(
          "[reshape] a reshape to the fixed shape " +
          detail::shape_str(shape_) + " (traced from an input of shape " +
          detail::shape_str(in_shape_) + ") cannot follow a new input shape " +
          detail::shape_str(in.shape()) +
          " under shapeless compile; write one dimension as -1.");
    }
    return {shape_};
  }
  int64_t rest = 1;
  for (auto d : requested_) rest *= d == -1 ? 1 : d;
  if (rest == 0 || static_cast<int64_t>(in.size()) % rest != 0) {
    throw std::invalid_argument(
        "[reshape] cannot infer the -1 dimension of " +
        detail::shape_str(requested_) + " for an array of shape " +
        detail::shape_str(in.shape()) + ".");
  }
  Shape out = requested_;
  out[infer - requested_.begin()] = static_cast<int32_t>(in.size() / rest);
  return {out};
}

std::vector<Shape> Squeeze::output_shapes(const std::vector<array>& inputs) {
  const Shape& in = inputs[0].shape();
  Shape out;
  size_t j = 0;
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    if (j < axes_.size() && axes_[j] == i) {
      if (in[i] != 1) {
        throw std::invalid_argument(
            "[squeeze] cannot squeeze axis " + std::to_string(i) +
            " of size " + std::to_string(in[i]) + " in shape " +
            detail::shape_str(in) + ".");
      }
      ++j;
    } else {
      out.push_back(in[i]);
    }
  }
  if (j != axes_.size()) {
    throw std::invalid_argument("[squeeze] axes out of range for shape " +
                                detail::shape_str(in) + ".");
  }
  return {out};
}

std::vector<Shape> ExpandDims::output_shapes(
    const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  for (int x : axes_) {
    if (x > static_cast<int>(out.size())) {
      throw std::invalid_argument(
          "[expand_dims] axis " + std::to_string(x) +
          " out of range for shape " +
          detail::shape_str(inputs[0].shape()) + ".");
    }
    out.insert(out.begin() + x, 1);
  }
  return {out};
}

bool Transpose::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Transpose*>(&other);
  return o && o->axes_ == axes_;
}

std::vector<Shape> Transpose::output_shapes(const std::vector<array>& inputs) {
  Shape out;
  for (int ax : axes_) out.push_back(inputs[0].shape(ax));
  return {out};
}

Strides reshape_strides(const array& in, const Shape& shape) {
  // Walk groups of old and new dimensions with equal products; a group of old
  // dims must itself be contiguous for the new dims to split it.
  const Shape& old_shape = in.shape();
  const Strides& old_strides = in.strides();
  Shape os;
  Strides ost;
  for (size_t i = 0; i < old_shape.size(); ++i) {
    if (old_shape[i] != 1) {
      os.push_back(old_shape[i]);
      ost.push_back(old_strides[i]);
    }
  }
  Strides out(shape.size(), 0);
  size_t oi = 0, ni = 0;
  while (ni < shape.size() && shape[ni] == 1) out[ni++] = 0;
  while (oi < os.size() && ni < shape.size()) {
    size_t oj = oi + 1, nj = ni + 1;
    int64_t op = os[oi], np = shape[ni];
    while (op != np) {
      if (np < op) {
        np *= shape[nj++];
      } else {
        op *= os[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k) {
      if (ost[k] != ost[k + 1] * os[k + 1]) return {};
    }
    out[nj - 1] = ost[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) out[k - 1] = out[k] * shape[k];
    oi = oj;
    ni = nj;
    while (ni < shape.size() && shape[ni] == 1) out[ni++] = 0;
  }
  return out;
}

} // namespace kiln
