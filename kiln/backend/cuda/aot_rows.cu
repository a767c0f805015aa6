// Ahead-of-time row kernels: softmax (plain and precise), logsumexp, LayerNorm,
// RMSNorm and their fused backwards, RoPE and attention on
// float32/float16/bfloat16, and the tensor-core attention kernels (forward and
// backward) on float16/bfloat16. float64, and everything in the JIT build, is
// compiled by NVRTC at first use.
#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/device/flash_attention_bwd.cuh"
#include "kiln/backend/cuda/device/norms.cuh"
#include "kiln/backend/cuda/device/rope.cuh"
#include "kiln/backend/cuda/device/sdpa.cuh"
#include "kiln/backend/cuda/device/softmax.cuh"
#include "kiln/backend/cuda/row_kernels.h"

namespace kiln::cuda {

namespace {

template <typename T>
inline constexpr int chunk = 16 / sizeof(T);
template <typename T>
inline constexpr int lane_chunks = row_lane_elements / chunk<T>;

template <typename T, typename Acc>
void softmax(AotTable& t, bool precise) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, softmax_kernel(d, precise, true),
           reinterpret_cast<const void*>(
               &softmax_warp<T, Acc, chunk<T>, lane_chunks<T>>));
  aot::put(t, softmax_kernel(d, precise, false),
           reinterpret_cast<const void*>(&softmax_block<T, Acc, chunk<T>>));
}

template <typename T>
void logsumexp(AotTable& t) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, logsumexp_kernel(d, true),
           reinterpret_cast<const void*>(&logsumexp_warp<T, chunk<T>>));
  aot::put(t, logsumexp_kernel(d, false),
           reinterpret_cast<const void*>(&logsumexp_block<T, chunk<T>>));
}

template <typename T, bool Rms>
void norm(AotTable& t, const char* op) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, norm_kernel(op, d, true),
           reinterpret_cast<const void*>(
               &norm_warp<T, chunk<T>, lane_chunks<T>, Rms>));
  aot::put(t, norm_kernel(op, d, false),
           reinterpret_cast<const void*>(&norm_block<T, chunk<T>, Rms>));
}

// The fused backward (op "LayerNormVjp" / "RMSNormVjp"), both row variants.
template <typename T, bool Rms>
void norm_vjp(AotTable& t, const char* op) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, norm_vjp_kernel(op, d, true),
           reinterpret_cast<const void*>(
               &norm_vjp_warp<T, chunk<T>, lane_chunks<T>, Rms>));
  aot::put(t, norm_vjp_kernel(op, d, false),
           reinterpret_cast<const void*>(&norm_vjp_block<T, chunk<T>, Rms>));
}

// Every width: head dimensions 32, 64, 128 and 256.
template <typename T>
void sdpa(AotTable& t) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, sdpa_kernel(d, 32),
           reinterpret_cast<const void*>(&sdpa_warp<T, 1>));
  aot::put(t, sdpa_kernel(d, 64),
           reinterpret_cast<const void*>(&sdpa_warp<T, 2>));
  aot::put(t, sdpa_kernel(d, 128),
           reinterpret_cast<const void*>(&sdpa_warp<T, 4>));
  aot::put(t, sdpa_kernel(d, 256),
           reinterpret_cast<const void*>(&sdpa_warp<T, 8>));
}

// One mask kind of head dimension D: the forward and the backward.
template <typename T, int D, int M>
void flash_sdpa_mask(AotTable& t) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, flash_sdpa_kernel(d, D, M),
           reinterpret_cast<const void*>(&sdpa_flash<T, D, M>));
  aot::put(t, flash_sdpa_bwd_kernel(d, D, M),
           reinterpret_cast<const void*>(&sdpa_flash_bwd<T, D, M>));
}

// Head dimensions 64 and 128, each mask kind.
template <typename T, int D>
void flash_sdpa(AotTable& t) {
  flash_sdpa_mask<T, D, 0>(t);
  flash_sdpa_mask<T, D, 1>(t);
  flash_sdpa_mask<T, D, 2>(t);
}

template <typename T>
void rows(AotTable& t) {
  norm<T, false>(t, "LayerNorm");
  norm<T, true>(t, "RMSNorm");
  norm_vjp<T, false>(t, "LayerNormVjp");
  norm_vjp<T, true>(t, "RMSNormVjp");
  aot::put(t, norm_vjp_dweight_kernel(aot::dtype_v<T>),
           reinterpret_cast<const void*>(&norm_vjp_dweight<T>));
  aot::put(t, rope_kernel(aot::dtype_v<T>),
           reinterpret_cast<const void*>(&rope<T>));
  sdpa<T>(t);
}

} // namespace

void add_aot_rows(AotTable& t) {
  softmax<float, float>(t, false);
  softmax<__half, __half>(t, false);
  softmax<__half, float>(t, true);
  softmax<__nv_bfloat16, __nv_bfloat16>(t, false);
  softmax<__nv_bfloat16, float>(t, true);
  logsumexp<float>(t);
  logsumexp<__half>(t);
  logsumexp<__nv_bfloat16>(t);
  rows<float>(t);
  rows<__half>(t);
  rows<__nv_bfloat16>(t);
  flash_sdpa<__half, 64>(t);
  flash_sdpa<__half, 128>(t);
  flash_sdpa<__nv_bfloat16, 64>(t);
  flash_sdpa<__nv_bfloat16, 128>(t);
}

} // namespace kiln::cuda
