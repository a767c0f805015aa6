// Softmax and logsumexp on the GPU over the last axis (device/softmax.cuh);
// inputs that are not row-contiguous are copied row-major first, as on the
// CPU, and the output is row-major.
#include "kiln/primitives/softmax.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/row_kernels.h"

namespace kiln {

void Softmax::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  Dtype dt = out.dtype();
  array x = inputs[0];
  if (!cuda::row_kernels_support(dt) ||
      !cuda::row_contiguous(inputs[0], x, s)) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  int64_t n = out.ndim() == 0 ? 1 : out.shape(-1);
  int64_t rows = static_cast<int64_t>(out.size()) / n;
  bool warp = cuda::row_fits_warp(n);
  CUfunction f = cuda::get_kernel(cuda::softmax_kernel(dt, precise_, warp));
  void* px = cuda::device_ptr(x, s);
  void* po = out.raw_data_ptr();
  void* args[] = {&px, &po, &rows, &n};
  cuda::launch_rows(f, warp, rows, n, dt, args, s.index);
}

void LogSumExp::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  Dtype dt = out.dtype();
  array x = inputs[0];
  if (!cuda::row_kernels_support(dt) ||
      !cuda::row_contiguous(inputs[0], x, s)) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  int64_t n = x.shape(-1);
  int64_t rows = static_cast<int64_t>(out.size());
  bool warp = cuda::row_fits_warp(n);
  CUfunction f = cuda::get_kernel(cuda::logsumexp_kernel(dt, warp));
  void* px = cuda::device_ptr(x, s);
  void* po = out.raw_data_ptr();
  void* args[] = {&px, &po, &rows, &n};
  cuda::launch_rows(f, warp, rows, n, dt, args, s.index);
}

} // namespace kiln
