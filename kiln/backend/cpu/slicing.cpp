// eval_cpu of the slicing primitives: windows and split pieces are views
// with an offset and scaled strides; updates copy (or take) the source and
// write the window.
#include <algorithm>

#include "kiln/backend/cpu/copy.h"
#include "kiln/backend/cpu/indices.h"
#include "kiln/core/layout.h"
#include "kiln/primitives/slicing.h"

namespace kiln {

namespace {

void set_view(const array& in, array& out, const Strides& strides,
              int64_t offset) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  auto l = layout_of(out.shape(), strides);
  out.copy_shared_buffer(in, strides, l.flags, l.data_size, offset);
}

// Element offset of a window of `window` whose starts along axes are read
// from `start`: a negative start wraps once, then it is clamped so the
// window fits.
int64_t dynamic_offset(const array& a, const array& start,
                       const std::vector<int>& axes, const Shape& window,
                       const Strides& strides) {
  auto starts = detail::index_values(start);
  int64_t offset = 0;
  for (size_t k = 0; k < axes.size(); ++k) {
    int ax = axes[k];
    int64_t dim = a.shape(ax), v = starts[k];
    if (v < 0) v += dim;
    v = std::clamp<int64_t>(v, 0, std::max<int64_t>(dim - window[ax], 0));
    offset += v * strides[ax];
  }
  return offset;
}

} // namespace

void DynamicSlice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  int64_t offset = out.size() == 0 ? 0
                                   : dynamic_offset(in, inputs[1], axes_,
                                                    slice_size_, in.strides());
  set_view(in, out, in.strides(), offset);
}

void SliceUpdate::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& update = inputs[1];
  detail::copy_or_donate(inputs[0], out);
  if (update.size() == 0) return;
  WindowPlace w = window_place(out.shape(), out.strides(), start_, stop_,
                               strides_);
  detail::copy_into(update, out, w.strides, w.offset);
}

void DynamicSliceUpdate::eval_cpu(const std::vector<array>& inputs,
                                  array& out) {
  const array& update = inputs[1];
  detail::copy_or_donate(inputs[0], out);
  if (update.size() == 0) return;
  int64_t offset =
      dynamic_offset(out, inputs[2], axes_, update.shape(), out.strides());
  detail::copy_into(update, out, out.strides(), offset);
}

void Concatenate::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  int64_t offset = 0;
  for (const array& in : inputs) {
    detail::copy_into(in, out, out.strides(), offset);
    offset += in.shape(axis_) * out.strides()[axis_];
  }
}

} // namespace kiln
