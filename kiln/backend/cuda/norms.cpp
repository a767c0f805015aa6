// LayerNorm and RMSNorm on the GPU over the last axis (device/norms.cuh),
// and their fused backwards. x (and the backward's cotangent) is copied
// row-major first when it is not row-contiguous, as on the CPU; weight and
// bias are read in place through their stride (0 for the 0-d stand-in of
// an absent one). The outputs are row-major.
#include <algorithm>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
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

namespace {

// Blocks of the backward: the rows' warps or blocks, at most about one
// wave of resident blocks (the warp kernel fits two per SM; the block
// kernel's count is capped at four per SM), since each block adds a row of
// n partial sums of dweight that the second kernel reads back.
int64_t norm_vjp_blocks(bool warp, int64_t rows, int threads) {
  int64_t per_block = warp ? cuda::norm_vjp_warp_threads / 32 : 1;
  int64_t per_sm = warp ? 2 : std::clamp(2048 / threads, 1, 4);
  return std::min((rows + per_block - 1) / per_block,
                  int64_t(cuda::device_info().sm_count) * per_sm);
}

} // namespace

// inputs: x, weight, the cotangent g; outputs: dx, dweight. One pass per
// row writes dx and each block's partial dweight sums; a second kernel sums
// the partials in a fixed order (deterministic, no atomics).
void NormVjp::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  const Stream& s = stream();
  Dtype dt = inputs[0].dtype();
  array x = inputs[0], g = inputs[2];
  const array& w = inputs[1];
  // An empty x (dweight all zeros) is left to the CPU, as are dtypes the
  // row kernels do not take.
  if (!cuda::row_kernels_support(dt) || x.size() == 0 ||
      !cuda::row_contiguous(inputs[0], x, s) ||
      !cuda::row_contiguous(inputs[2], g, s)) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  array &dx = outputs[0], &dw = outputs[1];
  cuda::set_device_output(dx, s);
  cuda::set_device_output(dw, s);
  int64_t n = x.shape(-1);
  int64_t rows = static_cast<int64_t>(x.size()) / n;
  int64_t sw = param_stride(w);
  bool warp = cuda::row_fits_warp(n);
  int threads = warp ? cuda::norm_vjp_warp_threads
                     : cuda::row_block_threads(n, dt);
  int64_t blocks = norm_vjp_blocks(warp, rows, threads);
  cuda::Scratch partial(static_cast<size_t>(blocks * n) * sizeof(double), s);
  CUfunction f = cuda::get_kernel(cuda::norm_vjp_kernel(name(), dt, warp));
  void* px = cuda::device_ptr(x, s);
  void* pw = cuda::device_ptr(w, s);
  void* pg = cuda::device_ptr(g, s);
  void* pdx = dx.raw_data_ptr();
  void* pp = partial.ptr;
  float eps = eps_;
  void* row_args[] = {&px, &pw, &pg, &pdx, &pp, &rows, &n, &sw, &eps};
  // Exactly `blocks` blocks: each owns a row of the partials.
  cuda::launch_blocks(f, blocks, threads, 1, row_args, s.index);

  CUfunction sum = cuda::get_kernel(cuda::norm_vjp_dweight_kernel(dt));
  void* pdw = dw.raw_data_ptr();
  bool scalar = w.ndim() == 0;
  void* sum_args[] = {&pp, &pdw, &blocks, &n, &scalar};
  if (scalar) {
    cuda::launch_blocks(sum, 1, 256, 1, sum_args, s.index);
  } else {
    // 32 columns per block, 8 rows of threads splitting the parts.
    cuda::launch_blocks(sum, (n + 31) / 32, 32, 8, sum_args, s.index);
  }
}

} // namespace kiln::fast
