// The tensor-core attention kernels (device/flash_attention.cuh, and the
// backward in device/flash_attention_bwd.cuh) through NVRTC for sm_90, with
// no GPU needed: float16 and bfloat16, head dimensions 64 and 128, each with
// its three mask kinds (none, boolean, additive) as siblings; the causal
// rule is a run-time flag of every one. Also the host rules that choose
// them: names, the shapes they take, their shared memory, and when the op
// takes the fused primitive on the GPU (and its fused backward).
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include "cuda/nvrtc_check.h"
#include "kiln/backend/cuda/device/flash_tiles.cuh"
#include "kiln/backend/cuda/row_kernels.h"
#include "kiln/primitives/fast.h"

namespace kiln::test {
namespace {

// Each kernel names the other two mask kinds as siblings: one compile per
// dtype and head dimension covers all three.
void expect_every_dtype_and_head_dim_compile(
    cuda::JitKernel (*kernel)(Dtype, int, int)) {
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      cuda::JitKernel k = kernel(dt, d, 0);
      ASSERT_EQ(k.siblings.size(), 2u) << k.name;
      expect_compiles(k);
    }
  }
}

TEST(NvrtcAttention, FlashEveryDtypeHeadDimAndMaskKind) {
  expect_every_dtype_and_head_dim_compile(cuda::flash_sdpa_kernel);
}

TEST(NvrtcAttention, FlashBackwardEveryDtypeHeadDimAndMaskKind) {
  expect_every_dtype_and_head_dim_compile(cuda::flash_sdpa_bwd_kernel);
}

TEST(NvrtcAttention, FlashBackwardNames) {
  EXPECT_EQ(cuda::flash_sdpa_bwd_kernel(float16, 64, 0).name,
            "fSdpaBwd64float16");
  cuda::JitKernel b = cuda::flash_sdpa_bwd_kernel(bfloat16, 128, 1);
  EXPECT_EQ(b.name, "fSdpaBwd128Boolbfloat16");
  EXPECT_EQ(b.expression, "kiln::cuda::sdpa_flash_bwd<__nv_bfloat16, 128, 1>");
  EXPECT_EQ(b.siblings.at(0).first, "fSdpaBwd128bfloat16");
  EXPECT_EQ(b.siblings.at(1).first, "fSdpaBwd128Addbfloat16");
  // Its source is the backward header, which includes the forward's.
  EXPECT_NE(b.source.find("flash_attention_bwd.cuh"), std::string::npos);
}

TEST(NvrtcAttention, FlashBackwardSharedMemory) {
  // K, V and two buffers of Q, dO: 6 tiles of 64 x (d + 8); dS^T of
  // 64 x 72; two buffers of 3 floats per row.
  EXPECT_EQ(cuda::flash_bwd_shared_bytes(64, 2), 66048);
  EXPECT_EQ(cuda::flash_bwd_shared_bytes(128, 2), 115200);
  EXPECT_EQ(cuda::flash_bwd_threads, 128);
  EXPECT_EQ(cuda::flash_bwd_min_blocks(64), 3);
  EXPECT_EQ(cuda::flash_bwd_min_blocks(128), 2);
  // A warp's query chunk packs into whole k16 steps and tiles the 64 rows.
  for (int d : {64, 128}) {
    EXPECT_EQ(cuda::flash_rows % cuda::flash_bwd_query_chunk(d), 0) << d;
    EXPECT_EQ(cuda::flash_bwd_query_chunk(d) % 16, 0) << d;
  }
  for (int d : {64, 128}) {
    EXPECT_LE(
        cuda::flash_bwd_min_blocks(d) * cuda::flash_bwd_shared_bytes(d, 2),
        227 * 1024)
        << d;
  }
}

TEST(NvrtcAttention, FlashNames) {
  EXPECT_EQ(cuda::flash_sdpa_kernel(float16, 64, 0).name, "fSdpa64float16");
  EXPECT_EQ(cuda::flash_sdpa_kernel(bfloat16, 128, 1).name,
            "fSdpa128Boolbfloat16");
  cuda::JitKernel add = cuda::flash_sdpa_kernel(float16, 128, 2);
  EXPECT_EQ(add.name, "fSdpa128Addfloat16");
  EXPECT_EQ(add.expression, "kiln::cuda::sdpa_flash<__half, 128, 2>");
  EXPECT_EQ(add.siblings.at(0).first, "fSdpa128float16");
  EXPECT_EQ(add.siblings.at(1).first, "fSdpa128Boolfloat16");
}

TEST(NvrtcAttention, FlashCoverage) {
  EXPECT_TRUE(cuda::flash_sdpa_supports(float16, 64, 64));
  EXPECT_TRUE(cuda::flash_sdpa_supports(bfloat16, 128, 128));
  EXPECT_FALSE(cuda::flash_sdpa_supports(float32, 64, 64));
  EXPECT_FALSE(cuda::flash_sdpa_supports(float64, 128, 128));
  EXPECT_FALSE(cuda::flash_sdpa_supports(float16, 96, 96));
  EXPECT_FALSE(cuda::flash_sdpa_supports(float16, 64, 128));
  EXPECT_FALSE(cuda::flash_sdpa_supports(bfloat16, 256, 256));
  // Q and two K, V buffers of 64 x (d + 8): d = 64 fits the default
  // 48 KiB; d = 128 needs the raised limit, and the blocks the kernels are
  // built for fit an H100/H200 SM (227 KiB).
  EXPECT_EQ(cuda::flash_shared_bytes(64, 2), 46080);
  EXPECT_EQ(cuda::flash_shared_bytes(128, 2), 87040);
  EXPECT_EQ(cuda::flash_min_blocks(64), 4);
  EXPECT_EQ(cuda::flash_min_blocks(128), 2);
  EXPECT_LE(cuda::flash_min_blocks(128) * cuda::flash_shared_bytes(128, 2),
            227 * 1024);
  EXPECT_LE(cuda::flash_min_blocks(64) * cuda::flash_shared_bytes(64, 2),
            227 * 1024);
}

TEST(NvrtcAttention, FusedPrimitiveOnTheGpu) {
  auto fits = [](Dtype dt, int64_t lq, int64_t d, int64_t dv, bool sinks) {
    return fast::ScaledDotProductAttention::gpu_fused_fits(dt, lq, d, dv,
                                                           sinks);
  };
  // The tensor-core kernel's shapes take the fused primitive at any query
  // length; sinks, other head dimensions and float32 keep the old rule
  // (the warp kernel up to 16 query rows, else the matmul graph).
  for (int64_t lq : {1, 16, 17, 4096}) {
    bool short_q = lq <= 16;
    EXPECT_TRUE(fits(bfloat16, lq, 128, 128, false)) << lq;
    EXPECT_TRUE(fits(float16, lq, 64, 64, false)) << lq;
    EXPECT_EQ(fits(float16, lq, 64, 64, true), short_q) << lq;
    EXPECT_EQ(fits(float16, lq, 96, 96, false), short_q) << lq;
    EXPECT_EQ(fits(bfloat16, lq, 64, 128, false), short_q) << lq;
    EXPECT_EQ(fits(float32, lq, 64, 64, false), short_q) << lq;
  }
}

TEST(NvrtcAttention, FusedBackwardOnTheGpu) {
  auto fits = [](Dtype dt, int64_t d, int64_t dv, bool sinks) {
    return fast::ScaledDotProductAttention::gpu_fused_backward_fits(dt, d, dv,
                                                                    sinks);
  };
  EXPECT_TRUE(fits(float16, 64, 64, false));
  EXPECT_TRUE(fits(bfloat16, 128, 128, false));
  EXPECT_FALSE(fits(bfloat16, 128, 128, true));
  EXPECT_FALSE(fits(float16, 96, 96, false));
  EXPECT_FALSE(fits(float16, 64, 128, false));
  EXPECT_FALSE(fits(float32, 64, 64, false));
  EXPECT_FALSE(fits(float64, 128, 128, false));
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
