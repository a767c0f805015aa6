// eval_gpu of the layout primitives that may copy: the copies run as GPU
// copy kernels (View reinterprets a row-major copy when its input is not
// row-major, as on the CPU). The pure views share one evaluation for every
// device (backend/common/views.cpp).
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/core/layout.h"
#include "kiln/primitives/shape.h"

namespace kiln {

void Reshape::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0 || in.flags().row_contiguous || out.ndim() == 0 ||
      !reshape_strides(in, out.shape()).empty()) {
    eval_cpu(inputs, out); // a view
    return;
  }
  // No strides express it: materialize row-major on the GPU, then view.
  auto tmp = array::uninitialized(in.shape(), in.dtype());
  if (!cuda::copy_row_major(in, tmp, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  auto strides = row_major_strides(out.shape());
  auto l = layout_of(out.shape(), strides);
  out.copy_shared_buffer(tmp, strides, l.flags, l.data_size);
}

void Contiguous::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.flags().row_contiguous ||
      (allow_col_major() && in.flags().col_contiguous)) {
    out.copy_shared_buffer(in);
  } else if (!cuda::copy_row_major(in, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void View::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  array src = in;
  if (!in.flags().row_contiguous) {
    src = array::uninitialized(in.shape(), in.dtype());
    if (!cuda::copy_row_major(in, src, stream())) {
      cuda::eval_on_cpu(*this, inputs, out);
      return;
    }
  }
  auto strides = row_major_strides(out.shape());
  auto l = layout_of(out.shape(), strides);
  out.copy_shared_buffer(src, strides, l.flags, l.data_size);
}

} // namespace kiln
