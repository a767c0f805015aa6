// The sources fast.cuda_kernel generates compile with NVRTC for sm_90 (no
// GPU needed): 16-bit types, template arguments, shapes and strides,
// cooperative groups, atomics, dynamic shared memory and a user header.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include "cuda/custom_kernels.h"
#include "cuda/nvrtc_check.h"
#include "kiln/backend/cuda/codegen/custom_kernel_source.h"
#include "kiln/ops/fast.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

void expect_source_compiles(const std::string& name,
                            const std::vector<std::string>& input_names,
                            const std::vector<array>& inputs,
                            const std::vector<std::string>& output_names,
                            const std::vector<Dtype>& output_dtypes,
                            const fast::TemplateArgs& targs,
                            const std::string& body,
                            const std::string& header = "") {
  std::vector<fast::CustomKernelShapeInfo> infos;
  for (auto& n : input_names) {
    infos.push_back({body.find(n + "_shape") != std::string::npos,
                     body.find(n + "_strides") != std::string::npos,
                     body.find(n + "_ndim") != std::string::npos});
  }
  auto [src, fn] =
      cuda::custom_kernel_source(name, input_names, inputs, infos,
                                 output_names, output_dtypes, targs, body,
                                 header);
  expect_compiles({fn, src, "kiln::cuda::custom::" + fn, {}});
}

TEST(NvrtcCustomKernel, GeneratedSourcesCompile) {
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    expect_source_compiles("exp", {"inp", "n"},
                           {random_array({8}, dt), array(8)}, {"out"}, {dt},
                           {{"T", float32}, {"O", dt}}, custom::exp_body);
  }
  expect_source_compiles("strided", {"inp"}, {random_array({3, 4}, int32)},
                         {"out"}, {int32}, {}, custom::strided_body);
  expect_source_compiles("histogram", {"idx"},
                         {random_array({16}, int32, 0, 4)},
                         {"counts", "doubled"}, {float32, int32}, {},
                         custom::histogram_body);
  expect_source_compiles("row_sum", {"x"}, {random_array({4, 32}, float32)},
                         {"sums"}, {float32}, {{"SCALE", 3}},
                         custom::row_sum_body, custom::row_sum_header);
  expect_source_compiles("transpose", {"inp"},
                         {random_array({5, 7}, bfloat16)}, {"out"},
                         {bfloat16}, {}, custom::transpose_body);
  // inf and a bool template argument.
  expect_source_compiles("clamp", {"x"}, {random_array({4}, float32)}, {"y"},
                         {float32}, {{"NEG", true}},
                         "y[0] = NEG ? -inf : inf;");
}

// cooperative_groups.h costs NVRTC over a second, so a kernel gets it only
// when its body or header names it.
TEST(NvrtcCustomKernel, CooperativeGroupsOnlyWhenNamed) {
  auto source_of = [](const std::string& body, const std::string& header) {
    return cuda::custom_kernel_source("k", {"x"}, {random_array({4}, float32)},
                                      {{false, false, false}}, {"y"},
                                      {float32}, {}, body, header)
        .first;
  };
  const std::string flag = "KILN_CUSTOM_COOPERATIVE_GROUPS";
  EXPECT_EQ(source_of("y[0] = x[0] * 2;", "").find(flag), std::string::npos);
  // A name that merely contains "cg" is not the alias.
  EXPECT_EQ(source_of("float cg_scale = 2; y[0] = x[0] * cg_scale;", "")
                .find(flag),
            std::string::npos);
  EXPECT_NE(source_of("y[cg::this_grid().thread_rank()] = 1;", "").find(flag),
            std::string::npos);
  EXPECT_NE(source_of("y[0] = 1;", "namespace g = cooperative_groups;")
                .find(flag),
            std::string::npos);
  // Both compile.
  auto [plain, fn] = cuda::custom_kernel_source(
      "plain", {"x"}, {random_array({4}, float32)}, {{false, false, false}},
      {"y"}, {float32}, {}, "float cg_scale = 2; y[0] = x[0] * cg_scale;", "");
  expect_compiles({fn, plain, "kiln::cuda::custom::" + fn, {}});
}

TEST(NvrtcCustomKernel, CompileErrorsCarryTheLog) {
  auto [src, fn] = cuda::custom_kernel_source(
      "broken", {"x"}, {random_array({4}, float32)}, {{false, false, false}},
      {"y"}, {float32}, {}, "y[0] = undefined_name;", "");
  try {
    cuda::jit_compile({fn, src, "kiln::cuda::custom::" + fn, {}}, "sm_90");
    ADD_FAILURE() << "compiled";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_name"), std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
