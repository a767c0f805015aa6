// eval_cpu of the layout primitives that may copy: reshape (a view where
// strides can express it), contiguous and view. The pure views are in
// backend/common/views.cpp.
#include "kiln/primitives/shape.h"
#include "kiln/backend/cpu/copy.h"
#include "kiln/core/layout.h"

namespace kiln {

namespace {

void set_view(const array& in, array& out, const Strides& strides,
              int64_t offset = 0) {
  auto l = layout_of(out.shape(), strides);
  out.copy_shared_buffer(in, strides, l.flags, l.data_size, offset);
}

} // namespace

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

} // namespace kiln
