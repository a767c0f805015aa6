// RoPE on the GPU (device/rope.cuh): one thread per rotated pair or copied
// feature. x is copied row-major first when it is not row-contiguous, as on
// the CPU; the output is row-major.
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/row_kernels.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

namespace {

// Host twin of device/rope.cuh's RopeParams: same members, same order.
struct RopeParams {
  int64_t rows;
  int64_t D;
  int64_t T;
  int64_t rows_per_batch;
  int64_t offset_stride;
  int64_t freqs_stride;
  int dims;
  int traditional;
  float base;
  float scale;
};
static_assert(sizeof(RopeParams) == 64);

} // namespace

// inputs: x, offset (int32, one or one per batch entry), optional freqs.
void RoPE::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const Stream& s = stream();
  array& out = outputs[0];
  Dtype dt = out.dtype();
  array x = inputs[0];
  if (!cuda::row_kernels_support(dt) ||
      !cuda::row_contiguous(inputs[0], x, s)) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  const array& offset = inputs[1];
  bool has_freqs = inputs.size() == 3;
  RopeParams p;
  p.D = x.shape(-1);
  p.T = x.shape(-2);
  p.rows = static_cast<int64_t>(x.size()) / p.D;
  p.rows_per_batch = p.rows / x.shape(0);
  // One offset for every row unless there is one per batch entry.
  p.offset_stride = offset.size() > 1 ? offset.strides()[0] : 0;
  p.freqs_stride = has_freqs ? inputs[2].strides()[0] : 0;
  p.dims = dims_;
  p.traditional = traditional_;
  p.base = base_;
  p.scale = scale_;
  int64_t items = p.rows * (dims_ / 2 + (p.D - dims_));
  CUfunction f = cuda::get_kernel(cuda::rope_kernel(dt));
  void* px = cuda::device_ptr(x, s);
  void* po = out.raw_data_ptr();
  void* poff = cuda::device_ptr(offset, s);
  void* pf = has_freqs ? cuda::device_ptr(inputs[2], s) : nullptr;
  void* args[] = {&px, &po, &poff, &pf, &p};
  cuda::launch(f, items, 1, args, s.index);
}

} // namespace kiln::fast
