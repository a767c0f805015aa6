// The gather/scatter, dynamic-slice, arange and random-bits kernels through
// NVRTC for sm_90, with no GPU needed: every template family, for every
// dtype family it serves (gather and scatter are compiled this way in both
// builds, so this is their only check before a GPU runs them).
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include "cuda/nvrtc_check.h"
#include "kiln/backend/cuda/creation.h"
#include "kiln/backend/cuda/elementwise_kernels.h"
#include "kiln/backend/cuda/indexing.h"
#include "kiln/backend/cuda/slicing.h"

namespace kiln::test {
namespace {

using cuda::JitKernel;

const std::vector<Dtype> index_dtypes = {uint8, uint16, uint32, uint64,
                                         int8,  int16,  int32,  int64};
const std::vector<Dtype> kernel_dtypes = {
    bool_, uint8,   uint16,   uint32,  uint64,  int8,   int16,
    int32, int64,   float16,  bfloat16, float32, float64};
const std::vector<ScatterReduce> reductions = {
    ScatterReduce::Sum, ScatterReduce::Prod, ScatterReduce::Max,
    ScatterReduce::Min};

TEST(NvrtcIndexing, GatherEveryCountElementAndIndexDtype) {
  // Every layout pair comes along as siblings.
  std::vector<JitKernel> ks;
  for (int n : {0, 1, 2, 3, 10}) {
    ks.push_back(cuda::gather_kernel(float32, int32, n, true, true, false));
  }
  for (Dtype dt : {bool_, float16, float64, complex64}) {
    ks.push_back(cuda::gather_kernel(dt, int64, 2, false, true, false));
  }
  for (Dtype it : index_dtypes) {
    ks.push_back(cuda::gather_kernel(int8, it, 1, true, false, false));
  }
  ks.push_back(cuda::gather_kernel(bfloat16, uint32, 3, false, false, true));
  expect_all_compile(ks);
}

TEST(NvrtcIndexing, ScatterEveryReductionAndDtype) {
  for (ScatterReduce r : reductions) {
    std::vector<JitKernel> ks;
    for (Dtype dt : kernel_dtypes) {
      ks.push_back(cuda::scatter_kernel(r, dt, int32, 1, true, false));
    }
    ks.push_back(cuda::scatter_kernel(r, float16, int64, 3, false, true));
    if (r == ScatterReduce::Sum || r == ScatterReduce::Prod) {
      ks.push_back(cuda::scatter_kernel(r, complex64, int32, 1, true, false));
    }
    expect_all_compile(ks);
  }
  std::vector<JitKernel> assign;
  for (Dtype dt : {bool_, float16, float32, float64, complex64}) {
    assign.push_back(
        cuda::scatter_kernel(ScatterReduce::None, dt, uint16, 2, true, false));
  }
  for (int n : {0, 1, 2, 3, 10}) {
    assign.push_back(cuda::scatter_kernel(ScatterReduce::None, int32, int64,
                                          n, false, false));
  }
  for (Dtype it : index_dtypes) {
    assign.push_back(
        cuda::scatter_kernel(ScatterReduce::None, int16, it, 1, true, true));
  }
  // The passes that keep the last of colliding assignments (each brings
  // its pair and both layouts), cells per start and per element.
  for (bool per_start : {true, false}) {
    for (Dtype dt : {bool_, bfloat16, float32, float64}) {
      assign.push_back(cuda::scatter_kernel(ScatterReduce::None, dt, int32,
                                            2, true, false,
                                            cuda::ScatterPass::Mark,
                                            per_start));
    }
    assign.push_back(cuda::scatter_kernel(ScatterReduce::None, int8, uint64, 3,
                                          false, true, cuda::ScatterPass::Write,
                                          per_start));
  }
  expect_all_compile(assign);
}

TEST(NvrtcIndexing, AlongAxisFamilies) {
  std::vector<JitKernel> ks;
  for (Dtype it : index_dtypes) {
    ks.push_back(cuda::gather_axis_kernel(float32, it, false));
  }
  for (Dtype dt : {bool_, float16, float64, complex64}) {
    ks.push_back(cuda::gather_axis_kernel(dt, int64, true));
  }
  for (ScatterReduce r : {ScatterReduce::None, ScatterReduce::Sum,
                          ScatterReduce::Prod, ScatterReduce::Max,
                          ScatterReduce::Min}) {
    for (Dtype dt : kernel_dtypes) {
      ks.push_back(cuda::scatter_axis_kernel(r, dt, int32, false));
    }
    ks.push_back(cuda::scatter_axis_kernel(r, bfloat16, uint64, true));
  }
  for (Dtype dt : {bool_, float16, float32, float64}) {
    ks.push_back(cuda::scatter_axis_kernel(ScatterReduce::None, dt, int64,
                                           false, cuda::ScatterPass::Mark));
  }
  expect_all_compile(ks);
}

TEST(NvrtcIndexing, DynamicSliceCopies) {
  std::vector<JitKernel> ks;
  for (bool into_out : {false, true}) {
    for (Dtype it : index_dtypes) {
      ks.push_back(
          cuda::dynamic_copy_kernel(uint32, uint32, it, into_out, false));
    }
    for (Dtype raw : {uint8, uint16, uint64}) {
      ks.push_back(cuda::dynamic_copy_kernel(raw, raw, int32, into_out, true));
    }
  }
  // Updates converted on write.
  for (Dtype from : kernel_dtypes) {
    ks.push_back(cuda::dynamic_copy_kernel(from, bfloat16, int64, true, false));
  }
  ks.push_back(cuda::dynamic_copy_kernel(float16, bool_, int64, true, false));
  expect_all_compile(ks);
}

TEST(NvrtcIndexing, ArangeAndRandomBits) {
  std::vector<JitKernel> ks;
  for (Dtype dt : kernel_dtypes) ks.push_back(cuda::arange_kernel(dt));
  expect_all_compile(ks);
  expect_compiles(cuda::random_bits_kernel());
}

TEST(NvrtcIndexing, Float32ErfEveryFloat) {
  std::vector<JitKernel> ks;
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    for (const char* op : {"Float32Erf", "Float32ErfInv"}) {
      ks.push_back(cuda::unary_kernel(op, dt, dt, "v"));
    }
  }
  expect_all_compile(ks);
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
