// Names and instantiations of the row kernels (device/softmax.cuh,
// device/norms.cuh, device/rope.cuh), shared by the launchers and the
// ahead-of-time table so both agree. Names: {w|b}{op}{dtype}, w for one
// warp per row (the row in registers), b for one block per row; the
// softmax op is "SoftmaxPrecise" when float16/bfloat16 sums run in float32.
// RoPE has one kernel per dtype, "vRoPE{dtype}"; attention one per dtype
// and features per lane, "wSdpa{W}{dtype}" (one warp per query row), and
// on tensor cores one per dtype, head dimension and mask kind,
// "fSdpa{D}[Bool|Add]{dtype}" (a tile of 64 query rows per block), and its
// backward "fSdpaBwd{D}[Bool|Add]{dtype}" (a tile of 64 keys per block).
#pragma once

#include <cstdint>
#include <string>

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/backend/cuda/launch_queue.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** Elements in one 16-byte chunk of a row. */
inline int row_vec_width(Dtype dt) { return 16 / dt.size; }
/** Elements each lane of a warp-per-row kernel holds: rows up to
 *  32 * row_lane_elements run one warp per row. 16 keeps those kernels
 *  near 100 registers (no spills; several blocks per SM). */
inline constexpr int row_lane_elements = 16;
inline constexpr int64_t warp_row_max = 32 * row_lane_elements;

/** The dtypes the row kernels take: float16, bfloat16, float32, float64. */
inline bool row_kernels_support(Dtype dt) {
  return dt == float16 || dt == bfloat16 || dt == float32 || dt == float64;
}

/** True when a row of n elements runs on one warp, else on one block. */
inline bool row_fits_warp(int64_t n) { return n <= warp_row_max; }

/** precise matters only for float16/bfloat16 (the others sum in their own
 *  compute type either way). */
JitKernel softmax_kernel(Dtype dt, bool precise, bool warp);
/** logsumexp over the last axis, "wLogSumExp{dtype}" / "bLogSumExp{dtype}". */
JitKernel logsumexp_kernel(Dtype dt, bool warp);
/** op: "LayerNorm" or "RMSNorm". */
JitKernel norm_kernel(const std::string& op, Dtype dt, bool warp);
/** The norms' fused backward (NormVjp), op "LayerNormVjp" or "RMSNormVjp":
 *  "{w|b}{op}{dtype}" with the other row variant and norm_vjp_dweight_kernel
 *  compiled alongside. */
JitKernel norm_vjp_kernel(const std::string& op, Dtype dt, bool warp);
/** The backward's dweight reduction over its blocks' partial sums,
 *  "vNormVjpDweight{dtype}". */
JitKernel norm_vjp_dweight_kernel(Dtype dt);
/** Threads of a warp-per-row backward block (device/norms.cuh's
 *  norm_vjp_warp_block). */
inline constexpr int norm_vjp_warp_threads = 256;
JitKernel rope_kernel(Dtype dt);

/** Features per lane of the attention kernels: head dimensions up to
 *  32 * sdpa_max_width run on the GPU. */
inline constexpr int sdpa_max_width = 8;
/** The attention kernel for head dimension max(D, Dv) (at most
 *  32 * sdpa_max_width), its widths 1, 2, 4, 8 compiled together. */
JitKernel sdpa_kernel(Dtype dt, int64_t head_dim);
/** Features per lane for head_dim: the power of two covering it. */
int sdpa_width(int64_t head_dim);

/** Whether the tensor-core attention kernel exists for these: float16 or
 *  bfloat16, head_dim == v_head_dim in {64, 128}. (The launcher also needs
 *  unit feature strides, 16-byte aligned rows and at least one key.) */
bool flash_sdpa_supports(Dtype dt, int64_t head_dim, int64_t v_head_dim);
/** The tensor-core attention kernel; mask_kind as the kernels' SdpaParams
 *  (0 none, 1 boolean, 2 additive), the other two compiled alongside. */
JitKernel flash_sdpa_kernel(Dtype dt, int head_dim, int mask_kind);
/** The tensor-core attention backward kernel (dq, dk, dv), same arguments;
 *  its pre-pass is flash_sdpa_kernel with statistics. */
JitKernel flash_sdpa_bwd_kernel(Dtype dt, int head_dim, int mask_kind);

/** Threads of a block-per-row kernel for rows of n elements: one 16-byte
 *  chunk each per step, a multiple of 32, at most 1024. */
int row_block_threads(int64_t n, Dtype dt);

/** Runs a row kernel (softmax or norm) over `rows` rows of n elements:
 *  warps of 32 per row in blocks of 256 threads, or one block per row with
 *  enough threads for one 16-byte chunk each (at most 1024). */
void launch_rows(CUfunction f, bool warp, int64_t rows, int64_t n, Dtype dt,
                 KernelArgs args, int stream);

} // namespace kiln::cuda
