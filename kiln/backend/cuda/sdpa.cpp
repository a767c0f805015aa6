// Scaled dot-product attention forward on the GPU, the output row-major as
// on the CPU. float16/bfloat16 with head dimension 64 or 128 (and no sinks)
// run on tensor cores (device/flash_attention.cuh) when q, k and v have unit
// feature strides and 16-byte aligned rows; everything else runs one warp
// per query row (device/sdpa.cuh), reading q, k, v and the mask through
// their strides. Head dimensions past 32 * sdpa_max_width and dtypes the
// kernels lack run on the CPU.
#include <cstdint>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device/flash_tiles.cuh"
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

} // namespace

// The tensor-core kernel serves every query length: a block per 64 query
// rows reads each key and value tile once for all of them. Where it does not
// apply, the warp-per-row kernel is a decoding kernel: with few query rows
// per head it reads each key and value row once per query row and that is
// cheap; for long query lengths the matmul graph on tensor cores is many
// times faster.
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
  void* pq = cuda::device_ptr(q, s);
  void* pk = cuda::device_ptr(k, s);
  void* pv = cuda::device_ptr(v, s);
  void* pm = has_mask ? cuda::device_ptr(inputs[3], s) : nullptr;
  void* po = out.raw_data_ptr();
  if (cuda::flash_sdpa_supports(dt, p.D, p.Dv) && !has_sinks_ && p.Lk > 0 &&
      flash_layout(q, pq) && flash_layout(k, pk) && flash_layout(v, pv)) {
    int d = static_cast<int>(p.D);
    CUfunction f =
        cuda::get_kernel(cuda::flash_sdpa_kernel(dt, d, p.mask_kind));
    void* args[] = {&pq, &pk, &pv, &pm, &po, &p};
    int64_t tiles = (p.Lq + cuda::flash_rows - 1) / cuda::flash_rows;
    cuda::launch_blocks_shared(f, p.B * p.Nq * tiles, cuda::flash_threads,
                               cuda::flash_shared_bytes(d, dt.size), args,
                               s.index);
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

} // namespace kiln::fast
