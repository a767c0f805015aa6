// Attention through cuDNN's fused flash-attention engines (the graph API,
// via cudnn-frontend's headers), the fast path on Hopper: on an H200 its
// wgmma kernels run a (4, 16, 4096, 128) causal bfloat16 forward in about
// 0.48 ms where kiln's own mma.sync kernel takes 1.2 ms. cuDNN is loaded at
// run time (dlopen), never linked, so the library stays small and runs
// without it: every entry point returns false when cuDNN is missing, off
// (KILN_CUDNN_ATTENTION=0, or set_cudnn_attention_enabled(false)), or
// declines the shapes, and the caller runs kiln's own kernels instead.
#pragma once

#include <cstdint>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::cuda {

/** Attention's parameters besides its operands: q (B, Nq, Lq, D), k and v
 *  (B, Nkv, Lk, D), read through their strides. */
struct CudnnAttentionArgs {
  float scale;
  bool causal; // bottom-right aligned, as kiln's causal mode (Lq <= Lk)
};

/** Whether cuDNN attention can run at all here: built with
 *  cudnn-frontend, the library loaded, a GPU of compute capability 8.0 or
 *  newer, and enabled. The first call loads the library. */
bool cudnn_attention_available();

/** Turns the cuDNN path off (kiln's own kernels run) or back on, returning
 *  the previous setting; for tests and benchmarks. The default comes from
 *  KILN_CUDNN_ATTENTION (on unless "0"). */
bool set_cudnn_attention_enabled(bool enabled);

/** Whether the inputs are ones cuDNN's flash engines take: float16 or
 *  bfloat16, equal head dimensions that are a multiple of 8 up to 128, at
 *  least 64 query rows (decoding stays on kiln's kernel), no longer query
 *  than key sequence under the causal rule, keys.
 *  The caller also ensures a unit last stride and 16-byte aligned rows
 *  (what kiln's tensor-core kernels need too). The graph may still decline
 *  the shapes. */
bool cudnn_attention_fits(const array& q, const array& k, const array& v,
                          bool causal);
/** cudnn_attention_fits by dtype and lengths (for decisions made while
 *  tracing, before layouts exist). */
bool cudnn_attention_shape_fits(Dtype dt, int64_t q_len, int64_t k_len,
                                int64_t head_dim, int64_t v_head_dim,
                                bool causal);

/** out = attention(q, k, v) on stream s, out row-major (B, Nq, Lq, D); when
 *  stats is not null it receives each query row's log-sum-exp of its scaled
 *  scores (float32, (B, Nq, Lq)), the backward's input. False when cuDNN
 *  cannot run it (nothing was launched). */
bool cudnn_attention_forward(const array& q, const array& k, const array& v,
                             void* out, void* stats,
                             const CudnnAttentionArgs& args, const Stream& s);

/** dq, dk, dv (row-major, q's, k's and v's shapes) from q, k, v, the
 *  forward's output o (row-major), its cotangent dout, and the forward's
 *  stats. False when cuDNN cannot run it (nothing was launched). */
bool cudnn_attention_backward(const array& q, const array& k, const array& v,
                              const void* o, const array& dout,
                              const void* stats, void* dq, void* dk, void* dv,
                              const CudnnAttentionArgs& args, const Stream& s);

/** Calls that ran on cuDNN since the process started (tests check the
 *  path was taken). */
struct CudnnAttentionCounts {
  int64_t forward = 0;
  int64_t backward = 0;
  int64_t graphs_built = 0;
};
CudnnAttentionCounts cudnn_attention_counts();

} // namespace kiln::cuda
