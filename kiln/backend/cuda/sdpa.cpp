// Scaled dot-product attention on the GPU, the output row-major as on the
// CPU. Forward: float16/bfloat16 with head dimension 64 or 128 (and no
// sinks) run on tensor cores when q, k and v have unit feature strides and
// 16-byte aligned rows: on cuDNN's flash engines where cuDNN is present and
// takes the problem (no mask; cudnn_attention.h), else on kiln's own
// kernel (device/flash_attention.cuh); everything else runs
// one warp per query row (device/sdpa.cuh), reading q, k, v and the mask
// through their strides. Head dimensions past 32 * sdpa_max_width and
// dtypes the kernels lack run on the CPU. Backward (for the tensor-core
// shapes): cuDNN's backward where cuDNN takes the problem, reading the
// output and row statistics the forward kept under vjp (or computed by
// cuDNN's forward first), else kiln's forward kernel's statistics pass,
// then device/flash_attention_bwd.cuh; operands they cannot read in place
// are copied row-major first.
#include <cstdint>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cudnn_attention.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/device/flash_tiles.cuh"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/row_kernels.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

namespace {

// Host twin of device/sdpa.cuh's SdpaParams: same members, same order.
struct SdpaParams {
  int64_t B, Nq, Lq, D, Nkv, Lk, Dv;
  int64_t q_strides[4], k_strides[4], v_strides[4], mask_strides[4];
  int64_t dout_strides[4];
  int64_t sinks_stride;
  float scale;
  int causal;
  int mask_kind;
};
static_assert(sizeof(SdpaParams) == 240);

constexpr int block_threads = 128;

void copy_strides(const array& a, int64_t (&to)[4]) {
  for (int d = 0; d < 4; ++d) to[d] = a.strides()[d];
}

// Whether the tensor-core kernel reads x (4-d, at device address ptr) in
// place: 16-byte copies need unit feature strides and every row (and so
// every (batch, head) slice) starting on a 16-byte boundary.
bool flash_layout(const array& x, const void* ptr) {
  int64_t chunk = 16 / x.itemsize();
  if (x.strides()[3] != 1 || reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
    return false;
  }
  for (int d = 0; d < 3; ++d) {
    if (x.shape(d) > 1 && x.strides()[d] % chunk != 0) return false;
  }
  return true;
}

// The kernels' parameters for q, k, v and the optional mask and sinks.
SdpaParams sdpa_params(const array& q, const array& k, const array& v,
                       const array* mask, const array* sinks, float scale,
                       bool causal) {
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
  if (mask) copy_strides(*mask, p.mask_strides);
  p.sinks_stride = sinks ? sinks->strides()[0] : 0;
  p.scale = scale;
  p.causal = causal;
  p.mask_kind = !mask ? 0 : mask->dtype() == bool_ ? 1 : 2;
  return p;
}

// x as the tensor-core kernels read it: x itself where they can
// (flash_layout: q, k, v and the cotangent through their strides), else a
// row-major copy made on s. False when no copy kernel takes x.
bool flash_operand(const array& x, array& out, const Stream& s) {
  if (flash_layout(x, cuda::device_ptr(x, s))) {
    out = x;
    return true;
  }
  out = array::uninitialized(x.shape(), x.dtype());
  return cuda::copy_row_major(x, out, s);
}

// Pointers a launch of the tensor-core forward takes besides q, k, v and
// the mask: the output, or the backward pre-pass's cotangent and stats,
// and optionally each row's log-sum-exp.
struct FlashForwardBuffers {
  void* out = nullptr;
  void* dout = nullptr;
  void* stats = nullptr;
  void* lse = nullptr;
};

// Launches device/flash_attention.cuh's forward on s for p.
void launch_flash_forward(Dtype dt, void* pq, void* pk, void* pv, void* pm,
                          FlashForwardBuffers b, SdpaParams& p,
                          const Stream& s) {
  int d = static_cast<int>(p.D);
  CUfunction f = cuda::get_kernel(cuda::flash_sdpa_kernel(dt, d, p.mask_kind));
  void* args[] = {&pq,     &pk,      &pv,    &pm, &b.out,
                  &b.dout, &b.stats, &b.lse, &p};
  int64_t tiles = (p.Lq + cuda::flash_rows - 1) / cuda::flash_rows;
  cuda::launch_blocks_shared(f, p.B * p.Nq * tiles, cuda::flash_threads,
                             cuda::flash_shared_bytes(d, dt.size), args,
                             s.index);
}

// The forward of a primitive with stats (no mask, no sinks, tensor-core
// shapes): out and each row's log-sum-exp, on cuDNN where it takes them,
// else on kiln's kernel; operands it cannot read in place are copied.
void forward_with_stats(const array& q_in, const array& k_in,
                        const array& v_in, float scale, bool causal,
                        array& out, array& stats, const Stream& s) {
  array q = q_in, k = k_in, v = v_in;
  if (!flash_operand(q_in, q, s) || !flash_operand(k_in, k, s) ||
      !flash_operand(v_in, v, s)) {
    throw std::runtime_error(
        "[ScaledDotProductAttention] no GPU copy of an operand.");
  }
  cuda::set_device_output(out, s);
  cuda::set_device_output(stats, s);
  if (out.size() == 0) return;
  if (cuda::cudnn_attention_forward(q, k, v, out.raw_data_ptr(),
                                    stats.raw_data_ptr(), {scale, causal},
                                    s)) {
    return;
  }
  SdpaParams p = sdpa_params(q, k, v, nullptr, nullptr, scale, causal);
  FlashForwardBuffers b;
  b.out = out.raw_data_ptr();
  b.lse = stats.raw_data_ptr();
  launch_flash_forward(q.dtype(), cuda::device_ptr(q, s),
                       cuda::device_ptr(k, s), cuda::device_ptr(v, s),
                       nullptr, b, p, s);
}

// dq, dk, dv into outputs on cuDNN's backward. It reads the forward's
// output and row log-sum-exps: the ones the forward kept (saved_o and
// saved_stats), else ones cuDNN's forward computes here first. False when
// cuDNN does not take the problem (then nothing was written to outputs).
bool cudnn_gradients(const array& q, const array& k, const array& v,
                     const array& dout, const array* saved_o,
                     const array* saved_stats, float scale, bool causal,
                     std::vector<array>& outputs, const Stream& s) {
  if (!cuda::cudnn_attention_available() ||
      !cuda::cudnn_attention_fits(q, k, v, causal)) {
    return false;
  }
  cuda::CudnnAttentionArgs a{scale, causal};
  array o = q, stats = q; // both set below
  if (saved_o) {
    // The forward wrote both row-major; an output read otherwise is copied.
    o = *saved_o;
    stats = *saved_stats;
    if (!o.flags().row_contiguous) {
      o = array::uninitialized(saved_o->shape(), saved_o->dtype());
      if (!cuda::copy_row_major(*saved_o, o, s)) return false;
    }
    if (!stats.flags().row_contiguous) return false;
  } else {
    o = array::uninitialized({q.shape(0), q.shape(1), q.shape(2), v.shape(3)},
                             q.dtype());
    stats = array::uninitialized({q.shape(0), q.shape(1), q.shape(2)},
                                 float32);
    cuda::set_device_output(o, s);
    cuda::set_device_output(stats, s);
    if (!cuda::cudnn_attention_forward(q, k, v, o.raw_data_ptr(),
                                       stats.raw_data_ptr(), a, s)) {
      return false;
    }
  }
  for (int i = 0; i < 3; ++i) cuda::set_device_output(outputs[i], s);
  return cuda::cudnn_attention_backward(
      q, k, v, cuda::device_ptr(o, s), dout, cuda::device_ptr(stats, s),
      outputs[0].raw_data_ptr(), outputs[1].raw_data_ptr(),
      outputs[2].raw_data_ptr(), a, s);
}

} // namespace

bool ScaledDotProductAttention::gpu_keeps_stats(Dtype dt, int64_t q_len,
                                                int64_t k_len,
                                                int64_t head_dim,
                                                int64_t v_head_dim,
                                                bool causal) {
  return cuda::flash_sdpa_supports(dt, head_dim, v_head_dim) &&
         cuda::cudnn_attention_shape_fits(dt, q_len, k_len, head_dim,
                                          v_head_dim, causal) &&
         cuda::cudnn_attention_available();
}

// The tensor-core kernel serves every query length: a block per 64 query
// rows reads each key and value tile once for all of them. Where it does not
// apply, the warp-per-row kernel is a decoding kernel: with few query rows
// per head it reads each key and value row once per query row and that is
// cheap; for long query lengths the matmul graph on tensor cores is many
// times faster.
// The fused backward takes exactly the tensor-core forward's shapes (it
// runs that kernel for its statistics); other layouts are copied.
bool ScaledDotProductAttention::gpu_fused_backward_fits(Dtype dt,
                                                        int64_t head_dim,
                                                        int64_t v_head_dim,
                                                        bool has_sinks) {
  return cuda::flash_sdpa_supports(dt, head_dim, v_head_dim) && !has_sinks;
}

bool ScaledDotProductAttention::gpu_fused_fits(Dtype dt, int64_t q_len,
                                               int64_t head_dim,
                                               int64_t v_head_dim,
                                               bool has_sinks) {
  if (cuda::flash_sdpa_supports(dt, head_dim, v_head_dim) && !has_sinks) {
    return true;
  }
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
  if (with_stats_) {
    forward_with_stats(q, k, v, scale_, do_causal_, out, outputs[1], s);
    return;
  }
  int64_t head_dim = std::max(q.shape(3), v.shape(3));
  if (!cuda::row_kernels_support(dt) || head_dim > 32 * cuda::sdpa_max_width) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  bool has_mask = inputs.size() > 3u + (has_sinks_ ? 1u : 0u);
  SdpaParams p =
      sdpa_params(q, k, v, has_mask ? &inputs[3] : nullptr,
                  has_sinks_ ? &inputs.back() : nullptr, scale_, do_causal_);
  void* pq = cuda::device_ptr(q, s);
  void* pk = cuda::device_ptr(k, s);
  void* pv = cuda::device_ptr(v, s);
  void* pm = has_mask ? cuda::device_ptr(inputs[3], s) : nullptr;
  void* po = out.raw_data_ptr();
  if (cuda::flash_sdpa_supports(dt, p.D, p.Dv) && !has_sinks_ && p.Lk > 0 &&
      flash_layout(q, pq) && flash_layout(k, pk) && flash_layout(v, pv)) {
    if (!has_mask && cuda::cudnn_attention_forward(
                         q, k, v, po, nullptr, {scale_, do_causal_}, s)) {
      return;
    }
    FlashForwardBuffers b;
    b.out = po;
    launch_flash_forward(dt, pq, pk, pv, pm, b, p, s);
    return;
  }
  void* ps = has_sinks_ ? cuda::device_ptr(inputs.back(), s) : nullptr;
  CUfunction f = cuda::get_kernel(cuda::sdpa_kernel(dt, head_dim));
  void* args[] = {&pq, &pk, &pv, &pm, &ps, &po, &p};
  int64_t rows = p.B * p.Nq * p.Lq;
  int64_t warps_per_block = block_threads / 32;
  cuda::launch_blocks(f, (rows + warps_per_block - 1) / warps_per_block,
                      block_threads, args, s.index);
}

// inputs: q, k, v, the output's cotangent, then the mask if any, then the
// forward's output and stats when saved. With them, cuDNN's backward runs
// alone; without, cuDNN runs its forward first. Else kiln's kernels: the
// forward kernel recomputes each query row's max, sum and rowsum(dO * O)
// into a float scratch; the backward kernel adds dq into a zeroed float32
// array (atomics), rounded to q's dtype at the end, and writes dk and dv.
void ScaledDotProductAttentionVjp::eval_gpu(const std::vector<array>& inputs,
                                            std::vector<array>& outputs) {
  const Stream& s = stream();
  Dtype dt = inputs[0].dtype();
  bool has_mask = inputs.size() - (saved_ ? 2 : 0) > 4;
  array q = inputs[0], k = inputs[1], v = inputs[2], dout = inputs[3];
  if (!cuda::flash_sdpa_supports(dt, inputs[0].shape(3), inputs[2].shape(3)) ||
      inputs[0].size() == 0 || inputs[1].size() == 0 ||
      !flash_operand(inputs[0], q, s) || !flash_operand(inputs[1], k, s) ||
      !flash_operand(inputs[2], v, s) || !flash_operand(inputs[3], dout, s)) {
    eval_fallback(inputs, outputs);
    return;
  }
  // With the forward's output and statistics kept, only cuDNN's backward
  // is tried: a backward cuDNN declines would decline them recomputed too.
  const array* saved_o = saved_ ? &inputs[inputs.size() - 2] : nullptr;
  const array* saved_stats = saved_ ? &inputs.back() : nullptr;
  if (!has_mask && cudnn_gradients(q, k, v, dout, saved_o, saved_stats,
                                   scale_, do_causal_, outputs, s)) {
    return;
  }
  const array* mask = has_mask ? &inputs[4] : nullptr;
  SdpaParams p = sdpa_params(q, k, v, mask, nullptr, scale_, do_causal_);
  copy_strides(dout, p.dout_strides);
  int d = static_cast<int>(p.D);
  array dq32 = array::uninitialized(q.shape(), float32);
  cuda::set_device_output(dq32, s);
  cuda::set_device_output(outputs[1], s);
  cuda::set_device_output(outputs[2], s);
  cuda::Scratch stats(p.B * p.Nq * p.Lq * 3 * sizeof(float), s);
  void* pq = cuda::device_ptr(q, s);
  void* pk = cuda::device_ptr(k, s);
  void* pv = cuda::device_ptr(v, s);
  void* pm = mask ? cuda::device_ptr(*mask, s) : nullptr;
  void* pdo = cuda::device_ptr(dout, s);
  void* pst = stats.ptr;
  void* pdq = dq32.raw_data_ptr();
  void* pdk = outputs[1].raw_data_ptr();
  void* pdv = outputs[2].raw_data_ptr();
  KILN_CHECK_CUDA(
      cudaMemsetAsync(pdq, 0, dq32.nbytes(), cuda::cuda_stream(s)));

  FlashForwardBuffers pre_pass;
  pre_pass.dout = pdo;
  pre_pass.stats = pst;
  launch_flash_forward(dt, pq, pk, pv, pm, pre_pass, p, s);

  void* args[] = {&pq, &pk, &pv, &pm, &pdo, &pst, &pdq, &pdk, &pdv, &p};
  int64_t k_tiles = (p.Lk + cuda::flash_keys - 1) / cuda::flash_keys;
  cuda::launch_blocks_shared(
      cuda::get_kernel(cuda::flash_sdpa_bwd_kernel(dt, d, p.mask_kind)),
      p.B * p.Nkv * k_tiles, cuda::flash_bwd_threads,
      cuda::flash_bwd_shared_bytes(d, dt.size), args, s.index);

  if (!cuda::copy_row_major(dq32, outputs[0], s)) {
    throw std::runtime_error(
        "[ScaledDotProductAttentionVjp] no GPU conversion of dq.");
  }
}

} // namespace kiln::fast
