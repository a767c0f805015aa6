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

namespace {

/** Runs the row kernel kernel(dtype, warp) over the rows of in's last axis
 *  (arguments: input, output, rows, row length); false when the dtype has
 *  no row kernel or the input cannot be made row-major on the GPU. */
template <typename MakeKernel>
bool run_on_rows(const array& in, array& out, const Stream& s,
                 MakeKernel kernel) {
  Dtype dt = out.dtype();
  array x = in;
  if (!cuda::row_kernels_support(dt) || !cuda::row_contiguous(in, x, s)) {
    return false;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return true;
  int64_t n = x.ndim() == 0 ? 1 : x.shape(-1);
  int64_t rows = static_cast<int64_t>(x.size()) / n;
  bool warp = cuda::row_fits_warp(n);
  CUfunction f = cuda::get_kernel(kernel(dt, warp));
  void* px = cuda::device_ptr(x, s);
  void* po = out.raw_data_ptr();
  void* args[] = {&px, &po, &rows, &n};
  cuda::launch_rows(f, warp, rows, n, dt, args, s.index);
  return true;
}

} // namespace

void Softmax::eval_gpu(const std::vector<array>& inputs, array& out) {
  bool ok = run_on_rows(inputs[0], out, stream(), [&](Dtype dt, bool warp) {
    return cuda::softmax_kernel(dt, precise_, warp);
  });
  if (!ok) cuda::eval_on_cpu(*this, inputs, out);
}

void LogSumExp::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!run_on_rows(inputs[0], out, stream(), cuda::logsumexp_kernel)) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

} // namespace kiln
