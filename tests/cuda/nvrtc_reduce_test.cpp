// The reduction kernels through NVRTC for sm_90, with no GPU needed: every
// operator over every dtype family, each kernel shape (warp, block, column,
// column with vector loads)
// with 32- and 64-bit indices, the second passes over partials,
// ArgMax/ArgMin and NumberOfElements. Each kernel compiles alone (without
// its siblings) to keep the test short; the shapes rotate over the dtypes so
// each operator meets every shape.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include <gtest/gtest.h>

#include "cuda/nvrtc_check.h"
#include "kiln/backend/cuda/jit_module.h"
#include "kiln/backend/cuda/reduce_kernels.h"
#include "kiln/primitives/reduction.h"

namespace kiln::test {
namespace {

using cuda::JitKernel;

// Each integer width (narrower than a shuffle, 32 and 64 bits, signed and
// unsigned), the floating types and bool.
const std::vector<Dtype> dtypes = {bool_,   int8,     uint16,  int32,
                                   uint64,  float16,  bfloat16, float32,
                                   float64};

// The kernel alone, without the siblings compiled with it.
void expect_compiles(JitKernel k) {
  k.siblings.clear();
  kiln::test::expect_compiles(k);
}

// The output dtype the ops give each reduction (ops/reduction.cpp).
Dtype out_dtype(const std::string& op, Dtype in) {
  if (op == "Sum" || op == "Prod") return sum_dtype(in);
  if (op == "And" || op == "Or") return bool_;
  return in;
}

TEST(NvrtcReduce, EveryOperatorAndDtype) {
  for (const char* op : {"Sum", "Prod", "Max", "Min", "And", "Or"}) {
    for (size_t i = 0; i < dtypes.size(); ++i) {
      Dtype out = out_dtype(op, dtypes[i]);
      expect_compiles(cuda::reduce_kernel("wrcC"[i % 4], op, dtypes[i], out));
    }
  }
}

TEST(NvrtcReduce, SixtyFourBitIndices) {
  for (char shape : {'w', 'r', 'c'}) {
    expect_compiles(cuda::reduce_kernel(shape, "Sum", bfloat16, bfloat16,
                                        true));
    expect_compiles(cuda::arg_reduce_kernel(shape, "ArgMax", float32, true));
  }
  expect_compiles(cuda::reduce_kernel('C', "Sum", bfloat16, float32, true));
}

TEST(NvrtcReduce, SecondPassesOverPartials) {
  // Partials hold the accumulator dtype; float16/bfloat16 accumulate in
  // float32, so their second pass reads float32.
  for (const char* op : {"Sum", "Prod", "Max", "Min"}) {
    for (Dtype out : {float16, bfloat16}) {
      Dtype acc = cuda::reduce_acc_dtype(op, out, out);
      EXPECT_EQ(acc, float32);
      expect_compiles(cuda::reduce_kernel('r', op, acc, out));
      expect_compiles(cuda::reduce_kernel('C', op, acc, out));
    }
  }
  EXPECT_EQ(cuda::reduce_acc_dtype("Sum", int8, int32), int32);
  EXPECT_EQ(cuda::reduce_acc_dtype("And", float32, bool_), bool_);
  EXPECT_EQ(cuda::reduce_acc_dtype("Max", uint16, uint16), uint16);
}

TEST(NvrtcReduce, ArgReduceEveryDtype) {
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (size_t i = 0; i < dtypes.size(); ++i) {
      expect_compiles(cuda::arg_reduce_kernel("wrc"[i % 3], op, dtypes[i]));
    }
  }
}

TEST(NvrtcReduce, NumberOfElementsFloatTypes) {
  for (Dtype d : {float16, bfloat16, float32, float64}) {
    expect_compiles(cuda::number_of_elements_kernel(d));
  }
}

TEST(NvrtcReduce, KernelNames) {
  EXPECT_EQ(cuda::reduce_kernel('w', "Sum", float16, float16).name,
            "wSumfloat16");
  EXPECT_EQ(cuda::reduce_kernel('c', "Sum", int8, int32, true).name,
            "cSumint8_int32_i64");
  JitKernel k = cuda::reduce_kernel('r', "Max", float32, float32);
  EXPECT_EQ(k.siblings.size(), 3u);
  EXPECT_EQ(cuda::reduce_kernel('C', "Sum", bfloat16, float32).expression,
            "kiln::cuda::col_reduce<kiln::cuda::SumOp<float>, "
            "__nv_bfloat16, float, 8, unsigned int>");
  EXPECT_EQ(cuda::reduce_kernel('C', "Or", bool_, bool_).expression,
            "kiln::cuda::col_reduce<kiln::cuda::OrOp, bool, bool, 8, "
            "unsigned int>");
  EXPECT_EQ(cuda::arg_reduce_kernel('c', "ArgMin", float32).siblings.size(),
            2u);
  EXPECT_EQ(cuda::arg_reduce_kernel('c', "ArgMin", bfloat16).name,
            "cArgMinbfloat16");
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
