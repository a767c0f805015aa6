// The views' evaluation, one for every device: shape, strides and offset
// over the input's buffer, which stays where it is (host or GPU memory).
// No element is read or written.
#include <cstdint>

#include "kiln/core/layout.h"
#include "kiln/primitives/custom.h"
#include "kiln/primitives/shape.h"
#include "kiln/primitives/slicing.h"

namespace kiln {

namespace {

void set_view(const array& in, array& out, const Strides& strides,
              int64_t offset = 0) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  auto l = layout_of(out.shape(), strides);
  out.copy_shared_buffer(in, strides, l.flags, l.data_size, offset);
}

// in viewed with out's (broadcast) shape: stride 0 along the axes it lacks
// or has of size 1.
void broadcast_view(const array& in, array& out) {
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

void Transpose::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides;
  for (int ax : axes_) strides.push_back(in.strides()[ax]);
  set_view(in, out, strides);
}

void Copy::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.copy_shared_buffer(inputs[0]);
}

void Depends::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(inputs[i]);
  }
}

void Slice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  WindowPlace w = window_place(in.shape(), in.strides(), start_, stop_,
                               strides_);
  // An empty window may start past the end: it views offset 0.
  set_view(in, out, w.strides, out.size() > 0 ? w.offset : 0);
}

// Every piece keeps the input's strides; only its offset along axis moves.
void Split::eval_cpu(const std::vector<array>& inputs,
                     std::vector<array>& outputs) {
  const array& in = inputs[0];
  auto pieces = this->pieces(inputs);
  for (size_t k = 0; k < outputs.size(); ++k) {
    int64_t offset = outputs[k].size() == 0
                         ? 0
                         : pieces[k].first * in.strides()[axis_];
    set_view(in, outputs[k], in.strides(), offset);
  }
}

void AsStrided::eval_cpu(const std::vector<array>& inputs, array& out) {
  set_view(inputs[0], out, strides_, static_cast<int64_t>(offset_));
}

void CustomTransforms::eval_cpu(const std::vector<array>& inputs,
                                std::vector<array>& outputs) {
  size_t first = inputs.size() - outputs.size();
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(inputs[first + i]);
  }
}

} // namespace kiln
