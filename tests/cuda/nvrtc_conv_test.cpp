// The im2col kernels (device/conv.cuh) through NVRTC for sm_90, with no GPU
// needed: conv1d/2d/3d (one program: each kernel carries the other two as
// siblings) with 32- and 64-bit row/column indices, for every dtype the
// GPU convolution takes, and the float16/bfloat16 ones writing float32.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include "cuda/nvrtc_check.h"
#include "kiln/backend/cuda/conv.h"

namespace kiln::test {
namespace {

TEST(NvrtcConv, Im2ColEveryDtypeDimensionalityAndIndexWidth) {
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    for (bool i64 : {false, true}) {
      cuda::JitKernel k = cuda::im2col_kernel(dt, dt, 2, i64);
      ASSERT_EQ(k.siblings.size(), 2u) << k.name;
      expect_compiles(k);
    }
  }
}

// float16/bfloat16 patches written as float32 (split reductions).
TEST(NvrtcConv, Im2ColToFloat32Patches) {
  for (Dtype dt : {float16, bfloat16}) {
    for (bool i64 : {false, true}) {
      expect_compiles(cuda::im2col_kernel(dt, float32, 3, i64));
    }
  }
}

TEST(NvrtcConv, KernelNames) {
  EXPECT_EQ(cuda::im2col_kernel(float32, float32, 1, false).name,
            "gIm2Col1float32");
  EXPECT_EQ(cuda::im2col_kernel(bfloat16, bfloat16, 3, true).name,
            "gIm2Col3bfloat16_i64");
  EXPECT_EQ(cuda::im2col_kernel(float16, float32, 2, true).name,
            "gIm2Col2float16_float32_i64");
  cuda::JitKernel k = cuda::im2col_kernel(float16, float16, 2, false);
  EXPECT_EQ(k.expression,
            "kiln::cuda::im2col<__half, __half, 2, unsigned int>");
  EXPECT_EQ(k.siblings[0].first, "gIm2Col1float16");
  EXPECT_EQ(k.siblings[1].first, "gIm2Col3float16");
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
