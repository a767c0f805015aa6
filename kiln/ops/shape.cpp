#include "kiln/ops/shape.h"

#include <algorithm>
#include <numeric>

#include "kiln/ops/utils.h"
#include "kiln/primitives/shape.h"

namespace kiln {

using detail::invalid;
using detail::shape_str;

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  Shape requested = shape;
  int infer = -1;
  size_t size = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) invalid("reshape", "only one dimension can be -1.");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      invalid("reshape", "negative dimension in " + shape_str(shape) + ".");
    } else if (shape[i] != 0 && size > SIZE_MAX / shape[i]) {
      invalid("reshape", "the size of shape " + shape_str(shape) +
                             " overflows.");
    } else {
      size *= shape[i];
    }
  }
  if (infer >= 0) {
    if (size == 0 || a.size() % size != 0) {
      invalid("reshape", "cannot infer the -1 dimension of " +
                             shape_str(shape) + " for an array of shape " +
                             shape_str(a.shape()) + ".");
    }
    if (a.size() / size > static_cast<size_t>(INT32_MAX)) {
      invalid("reshape", "the -1 dimension of " + shape_str(shape) +
                             " for an array of shape " + shape_str(a.shape()) +
                             " would be " + std::to_string(a.size() / size) +
                             ", more than a dimension holds (2^31 - 1).");
    }
    shape[infer] = static_cast<int32_t>(a.size() / size);
    size = a.size();
  }
  if (size != a.size()) {
    invalid("reshape", "cannot reshape an array of shape " +
                           shape_str(a.shape()) + " (size " +
                           std::to_string(a.size()) + ") into shape " +
                           shape_str(shape) + ".");
  }
  if (shape == a.shape()) return a;
  auto p = std::make_shared<Reshape>(to_stream(s), shape, std::move(requested),
                                     a.shape());
  return array(std::move(shape), a.dtype(), std::move(p), {a});
}

array flatten(const array& a, int start_axis, int end_axis, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (nd == 0) return reshape(a, {1}, s);
  start_axis = detail::normalize_axis(start_axis, nd, "flatten");
  end_axis = detail::normalize_axis(end_axis, nd, "flatten");
  if (start_axis > end_axis) {
    invalid("flatten", "start_axis must not come after end_axis.");
  }
  Shape shape(a.shape().begin(), a.shape().begin() + start_axis);
  int64_t merged = 1;
  bool too_long = false; // a zero extent later may still make it 0
  for (int i = start_axis; i <= end_axis; ++i) {
    merged *= a.shape(i);
    if (merged > INT32_MAX) too_long = true, merged = INT32_MAX + int64_t{1};
  }
  if (too_long && merged != 0) {
    invalid("flatten", "axes " + std::to_string(start_axis) + " to " +
                           std::to_string(end_axis) + " of shape " +
                           shape_str(a.shape()) +
                           " hold more elements than a dimension holds "
                           "(2^31 - 1).");
  }
  shape.push_back(static_cast<int32_t>(merged));
  shape.insert(shape.end(), a.shape().begin() + end_axis + 1, a.shape().end());
  return reshape(a, std::move(shape), s);
}

array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s) {
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), "unflatten");
  if (shape.empty()) invalid("unflatten", "shape must not be empty.");
  Shape out(a.shape().begin(), a.shape().begin() + axis);
  size_t before = out.size();
  out.insert(out.end(), shape.begin(), shape.end());
  out.insert(out.end(), a.shape().begin() + axis + 1, a.shape().end());
  // reshape infers a -1 against the whole array, which is the same here.
  if (std::count(shape.begin(), shape.end(), -1) == 0) {
    size_t prod = 1;
    for (auto d : shape) prod *= d;
    if (prod != static_cast<size_t>(a.shape(axis))) {
      invalid("unflatten", "shape " + shape_str(shape) +
                               " does not split axis of size " +
                               std::to_string(a.shape(axis)) + ".");
    }
  }
  (void)before;
  return reshape(a, std::move(out), s);
}

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (static_cast<int>(axes.size()) != nd) {
    invalid("transpose", "got " + std::to_string(axes.size()) +
                             " axes for an array with " + std::to_string(nd) +
                             " dimensions.");
  }
  for (auto& ax : axes) ax = detail::normalize_axis(ax, nd, "transpose");
  auto sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < nd; ++i) {
    if (sorted[i] != i) invalid("transpose", "axes must be a permutation.");
  }
  bool identity = true;
  for (int i = 0; i < nd; ++i) identity &= axes[i] == i;
  if (identity) return a;
  Shape shape;
  for (int ax : axes) shape.push_back(a.shape(ax));
  auto p = std::make_shared<Transpose>(to_stream(s), std::move(axes));
  return array(std::move(shape), a.dtype(), std::move(p), {a});
}

array transpose(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.rbegin(), axes.rend(), 0);
  return transpose(a, std::move(axes), s);
}

array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  axis1 = detail::normalize_axis(axis1, nd, "swapaxes");
  axis2 = detail::normalize_axis(axis2, nd, "swapaxes");
  std::vector<int> axes(nd);
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[axis1], axes[axis2]);
  return transpose(a, std::move(axes), s);
}

array moveaxis(const array& a, int source, int destination, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  source = detail::normalize_axis(source, nd, "moveaxis");
  destination = detail::normalize_axis(destination, nd, "moveaxis");
  std::vector<int> axes;
  for (int i = 0; i < nd; ++i) {
    if (i != source) axes.push_back(i);
  }
  axes.insert(axes.begin() + destination, source);
  return transpose(a, std::move(axes), s);
}

namespace {

array broadcast_checked(const array& a, const Shape& shape, bool implicit,
                        StreamOrDevice s) {
  if (a.shape() == shape) return a;
  if (shape.size() < a.ndim()) {
    invalid("broadcast_to", "cannot broadcast an array of shape " +
                                shape_str(a.shape()) + " to the shape " +
                                shape_str(shape) + " with fewer dimensions.");
  }
  auto out = detail::broadcast_shapes(a.shape(), shape, "broadcast_to");
  if (out != shape) {
    invalid("broadcast_to", "cannot broadcast an array of shape " +
                                shape_str(a.shape()) + " to shape " +
                                shape_str(shape) + ".");
  }
  auto p = std::make_shared<Broadcast>(to_stream(s), shape, implicit);
  return array(shape, a.dtype(), std::move(p), {a});
}

} // namespace

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s) {
  return broadcast_checked(a, shape, false, s);
}

namespace detail {
array broadcast_operand(const array& a, const Shape& shape, StreamOrDevice s) {
  return broadcast_checked(a, shape, true, s);
}

array reshape_like(const array& a, const array& like, StreamOrDevice s) {
  if (!shape_follows_replay(like)) {
    return reshape(a, like.shape(), s);
  }
  if (a.size() != like.size()) {
    invalid("reshape", "cannot reshape an array of shape " +
                           shape_str(a.shape()) + " into shape " +
                           shape_str(like.shape()) + ".");
  }
  auto p = std::make_shared<Reshape>(to_stream(s), like.shape(), like.shape(),
                                     a.shape());
  return array(like.shape(), a.dtype(), std::move(p), {a, like});
}

array broadcast_like(const array& a, const array& like, StreamOrDevice s) {
  if (!shape_follows_replay(like)) {
    return broadcast_to(a, like.shape(), s);
  }
  auto p = std::make_shared<BroadcastLike>(to_stream(s));
  Shape shape = p->output_shapes({a, like})[0];
  return array(std::move(shape), a.dtype(), std::move(p), {a, like});
}
} // namespace detail

std::vector<array> broadcast_arrays(const std::vector<array>& inputs,
                                    StreamOrDevice s) {
  Shape shape;
  for (auto& in : inputs) {
    shape = detail::broadcast_shapes(shape, in.shape(), "broadcast_arrays");
  }
  std::vector<array> out;
  for (auto& in : inputs) out.push_back(broadcast_to(in, shape, s));
  return out;
}

array expand_dims(const array& a, const std::vector<int>& axes,
                  StreamOrDevice s) {
  int out_nd = static_cast<int>(a.ndim() + axes.size());
  auto ax = detail::normalize_axes(axes, out_nd, "expand_dims");
  if (ax.empty()) return a;
  Shape shape = a.shape();
  for (int x : ax) shape.insert(shape.begin() + x, 1);
  auto p = std::make_shared<ExpandDims>(to_stream(s), std::move(ax));
  return array(std::move(shape), a.dtype(), std::move(p), {a});
}

array expand_dims(const array& a, int axis, StreamOrDevice s) {
  return expand_dims(a, std::vector<int>{axis}, s);
}

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  auto ax = detail::normalize_axes(axes, static_cast<int>(a.ndim()), "squeeze");
  Shape shape;
  for (int i = 0, j = 0; i < static_cast<int>(a.ndim()); ++i) {
    if (j < static_cast<int>(ax.size()) && ax[j] == i) {
      if (a.shape(i) != 1) {
        invalid("squeeze", "cannot squeeze axis " + std::to_string(i) +
                               " of size " + std::to_string(a.shape(i)) +
                               " in shape " + shape_str(a.shape()) + ".");
      }
      ++j;
    } else {
      shape.push_back(a.shape(i));
    }
  }
  if (ax.empty()) return a;
  auto p = std::make_shared<Squeeze>(to_stream(s), std::move(ax));
  return array(std::move(shape), a.dtype(), std::move(p), {a});
}

array squeeze(const array& a, int axis, StreamOrDevice s) {
  return squeeze(a, std::vector<int>{axis}, s);
}

array squeeze(const array& a, StreamOrDevice s) {
  std::vector<int> axes;
  for (int i = 0; i < static_cast<int>(a.ndim()); ++i) {
    if (a.shape(i) == 1) axes.push_back(i);
  }
  return squeeze(a, axes, s);
}

array contiguous(const array& a, bool allow_col_major, StreamOrDevice s) {
  // The layout is only known after evaluation; the primitive decides then.
  auto p = std::make_shared<Contiguous>(to_stream(s), allow_col_major);
  return array(a.shape(), a.dtype(), std::move(p), {a});
}

array view(const array& a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  Shape shape = a.shape();
  size_t in_size = a.itemsize(), out_size = dtype.size;
  if (in_size != out_size) {
    if (a.ndim() == 0) {
      invalid("view", "cannot change the itemsize of a 0-d array (" +
                          detail::describe(a) + " to " + dtype_name(dtype) +
                          ").");
    }
    size_t bytes = static_cast<size_t>(shape.back()) * in_size;
    if (bytes % out_size != 0) {
      invalid("view", "the last axis of a " + detail::describe(a) +
                          " does not divide into " + dtype_name(dtype) +
                          " elements.");
    }
    shape.back() = static_cast<int32_t>(bytes / out_size);
  }
  auto p = std::make_shared<View>(to_stream(s), dtype);
  return array(std::move(shape), dtype, std::move(p), {a});
}

} // namespace kiln
