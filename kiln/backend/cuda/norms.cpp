// LayerNorm and RMSNorm on the GPU over the last axis (device/norms.cuh).
// x is copied row-major first when it is not row-contiguous, as on the CPU;
// weight and bias are read in place through their stride (0 for the 0-d
// stand-in of an absent one). The output is row-major.
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/row_kernels.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

namespace {

int64_t param_stride(const array& p) {
  return p.ndim() == 0 ? 0 : p.strides()[0];
}

// inputs: x, weight, and (LayerNorm) bias.
void normalize(Primitive& p, const std::string& op,
               const std::vector<array>& inputs, std::vector<array>& outputs,
               float eps) {
  const Stream& s = p.stream();
  array& out = outputs[0];
  Dtype dt = out.dtype();
  array x = inputs[0];
  if (!cuda::row_kernels_support(dt) ||
      !cuda::row_contiguous(inputs[0], x, s)) {
    cuda::eval_on_cpu(p, inputs, outputs);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  bool rms = inputs.size() == 2;
  int64_t n = x.shape(-1);
  int64_t rows = static_cast<int64_t>(x.size()) / n;
  int64_t sw = param_stride(inputs[1]);
  int64_t sb = rms ? 0 : param_stride(inputs[2]);
  bool warp = cuda::row_fits_warp(n);
  CUfunction f = cuda::get_kernel(cuda::norm_kernel(op, dt, warp));
  void* px = cuda::device_ptr(x, s);
  void* pw = cuda::device_ptr(inputs[1], s);
  void* pb = rms ? nullptr : cuda::device_ptr(inputs[2], s);
  void* po = out.raw_data_ptr();
  void* args[] = {&px, &pw, &pb, &po, &rows, &n, &sw, &sb, &eps};
  cuda::launch_rows(f, warp, rows, n, dt, args, s.index);
}

} // namespace

void LayerNorm::eval_gpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  normalize(*this, name(), inputs, outputs, eps_);
}

void RMSNorm::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  normalize(*this, name(), inputs, outputs, eps_);
}

// No backward kernels yet: the vjp keeps the graph on GPU streams, and a
// NormVjp made there evaluates that graph on the device.
void NormVjp::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  eval_fallback(inputs, outputs);
}

} // namespace kiln::fast
