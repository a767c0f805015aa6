// Scaled dot-product attention forward on the GPU (device/sdpa.cuh): one
// warp per query row, q, k, v and the mask read through their strides, the
// output row-major as on the CPU. Head dimensions past
// 32 * sdpa_max_width and dtypes the kernel lacks run on the CPU.
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/row_kernels.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

namespace {

// Host twin of device/sdpa.cuh's SdpaParams: same members, same order.
struct SdpaParams {
  int64_t B, Nq, Lq, D, Nkv, Lk, Dv;
  int64_t q_strides[4], k_strides[4], v_strides[4], mask_strides[4];
  int64_t sinks_stride;
  float scale;
  int causal;
  int mask_kind;
};
static_assert(sizeof(SdpaParams) == 208);

constexpr int block_threads = 128;

void copy_strides(const array& a, int64_t (&to)[4]) {
  for (int d = 0; d < 4; ++d) to[d] = a.strides()[d];
}

} // namespace

// The warp-per-row kernel is a decoding kernel: with few query rows per head
// it reads each key and value row once per query row and that is cheap; for
// long query lengths the matmul graph on tensor cores is many times faster.
bool ScaledDotProductAttention::gpu_fused_fits(Dtype dt, int64_t q_len,
                                               int64_t head_dim,
                                               int64_t v_head_dim,
                                               bool has_sinks) {
  (void)has_sinks;
  return cuda::row_kernels_support(dt) && q_len <= 16 &&
         std::max(head_dim, v_head_dim) <= 32 * cuda::sdpa_max_width;
}

// inputs: q, k, v, then the mask if any, then the sinks if any.
void ScaledDotProductAttention::eval_gpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  const Stream& s = stream();
  array& out = outputs[0];
  Dtype dt = out.dtype();
  const array &q = inputs[0], &k = inputs[1], &v = inputs[2];
  int64_t head_dim = std::max(q.shape(3), v.shape(3));
  if (!cuda::row_kernels_support(dt) || head_dim > 32 * cuda::sdpa_max_width) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  bool has_mask = inputs.size() > 3u + (has_sinks_ ? 1u : 0u);
  SdpaParams p{};
  p.B = q.shape(0);
  p.Nq = q.shape(1);
  p.Lq = q.shape(2);
  p.D = q.shape(3);
  p.Nkv = k.shape(1);
  p.Lk = k.shape(2);
  p.Dv = v.shape(3);
  copy_strides(q, p.q_strides);
  copy_strides(k, p.k_strides);
  copy_strides(v, p.v_strides);
  if (has_mask) copy_strides(inputs[3], p.mask_strides);
  p.sinks_stride = has_sinks_ ? inputs.back().strides()[0] : 0;
  p.scale = scale_;
  p.causal = do_causal_;
  p.mask_kind = !has_mask ? 0 : inputs[3].dtype() == bool_ ? 1 : 2;
  CUfunction f = cuda::get_kernel(cuda::sdpa_kernel(dt, head_dim));
  void* pq = cuda::device_ptr(q, s);
  void* pk = cuda::device_ptr(k, s);
  void* pv = cuda::device_ptr(v, s);
  void* pm = has_mask ? cuda::device_ptr(inputs[3], s) : nullptr;
  void* ps = has_sinks_ ? cuda::device_ptr(inputs.back(), s) : nullptr;
  void* po = out.raw_data_ptr();
  void* args[] = {&pq, &pk, &pv, &pm, &ps, &po, &p};
  int64_t rows = p.B * p.Nq * p.Lq;
  int64_t warps_per_block = block_threads / 32;
  cuda::launch_blocks(f, (rows + warps_per_block - 1) / warps_per_block,
                      block_threads, args, s.index);
}

} // namespace kiln::fast
