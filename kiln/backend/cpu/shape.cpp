// eval_cpu of the layout primitives: views where strides can express the
// result, copies otherwise.
#include "kiln/primitives/shape.h"
#include "kiln/backend/cpu/copy.h"
#include "kiln/core/layout.h"
#include "kiln/primitives/custom.h"

namespace kiln {

namespace {

void set_view(const array& in, array& out, const Strides& strides,
              int64_t offset = 0) {
  auto l = layout_of(out.shape(), strides);
  out.copy_shared_buffer(in, strides, l.flags, l.data_size, offset);
}

} // namespace

namespace {

// in viewed with out's (broadcast) shape: stride 0 along the axes it lacks
// or has of size 1.
void broadcast_view(const array& in, array& out) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  set_view(in, out, broadcast_strides(in, out.shape()));
}

} // namespace

void Broadcast::eval_cpu(const std::vector<array>& inputs, array& out) {
  broadcast_view(inputs[0], out);
}

void BroadcastLike::eval_cpu(const std::vector<array>& inputs, array& out) {
  broadcast_view(inputs[0], out);
}

void Squeeze::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides;
  size_t j = 0;
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (j < axes_.size() && axes_[j] == static_cast<int>(i)) {
      ++j;
    } else {
      strides.push_back(in.strides()[i]);
    }
  }
  set_view(in, out, strides);
}

void ExpandDims::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides = in.strides();
  Shape shape = in.shape();
  for (int x : axes_) {
    // The stride a row-major layout would give the new axis (any value
    // serves a size-1 axis; this one keeps the flags exact).
    int64_t st = x < static_cast<int>(strides.size())
                     ? strides[x] * static_cast<int64_t>(shape[x])
                     : 1;
    strides.insert(strides.begin() + x, st);
    shape.insert(shape.begin() + x, 1);
  }
  set_view(in, out, strides);
}

void Reshape::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  if (in.flags().row_contiguous) {
    set_view(in, out, row_major_strides(out.shape()));
    return;
  }
  Strides strides = reshape_strides(in, out.shape());
  if (!strides.empty() || out.ndim() == 0) {
    set_view(in, out, strides);
    return;
  }
  // No strides express it: materialize row-major, then view that.
  auto tmp = array::uninitialized(in.shape(), in.dtype());
  detail::copy_row_major(in, tmp);
  set_view(tmp, out, row_major_strides(out.shape()));
}

void Transpose::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides;
  for (int ax : axes_) strides.push_back(in.strides()[ax]);
  set_view(in, out, strides);
}

void Copy::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.copy_shared_buffer(inputs[0]);
}

void Contiguous::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.flags().row_contiguous ||
      (allow_col_major_ && in.flags().col_contiguous)) {
    out.copy_shared_buffer(in);
  } else {
    detail::copy_row_major(in, out);
  }
}

} // namespace kiln

namespace kiln {

void View::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  array src = in;
  if (!in.flags().row_contiguous) {
    src = array::uninitialized(in.shape(), in.dtype());
    detail::copy_row_major(in, src);
  }
  auto strides = row_major_strides(out.shape());
  auto l = layout_of(out.shape(), strides);
  out.copy_shared_buffer(src, strides, l.flags, l.data_size);
}

void Depends::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(inputs[i]);
  }
}

} // namespace kiln
