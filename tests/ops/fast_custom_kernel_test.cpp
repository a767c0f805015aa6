// fast.cuda_kernel and fast.precompiled_cuda_kernel without a GPU: argument
// checks (each names the op), the CPU's refusal, and the generated source.
// tests/cuda/ compiles the source with NVRTC and runs kernels on the GPU.
#include <stdexcept>

#include "kiln/backend/cuda/codegen/custom_kernel_source.h"
#include "kiln/ops/fast.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

const char* exp_body = R"(
  auto elem = cg::this_grid().thread_rank();
  if (elem < inp_shape[0] * inp_shape[1]) out[elem] = exp(T(inp[elem]));
)";

TEST(FastCustomKernel, RejectsBadNames) {
  expect_invalid([] { fast::cuda_kernel("1x", {"a"}, {"o"}, ""); },
                 "cuda_kernel", "'1x' is not a C identifier");
  expect_invalid([] { fast::cuda_kernel("k", {"a-b"}, {"o"}, ""); },
                 "cuda_kernel", "input name 'a-b'");
  expect_invalid([] { fast::cuda_kernel("k", {"a"}, {}, ""); },
                 "cuda_kernel", "at least one output");
  expect_invalid([] { fast::cuda_kernel("k", {"a"}, {"a"}, ""); },
                 "cuda_kernel", "'a' appears twice");
  expect_invalid([] { fast::cuda_kernel("k", {"a"}, {"o"}, "", "", true, -1); },
                 "cuda_kernel", "negative");
}

TEST(FastCustomKernel, RejectsBadCalls) {
  auto k = fast::cuda_kernel("k", {"inp"}, {"out"}, exp_body);
  array x = random_array({4, 5}, float32);
  auto call = [&](std::vector<array> in, std::vector<Shape> shapes,
                  std::vector<Dtype> dtypes, std::tuple<int, int, int> grid,
                  std::tuple<int, int, int> tg, fast::TemplateArgs t = {}) {
    return k(in, shapes, dtypes, grid, tg, t, std::nullopt, false,
             Device::gpu);
  };
  expect_invalid([&] { call({}, {{20}}, {float32}, {20, 1, 1}, {32, 1, 1}); },
                 "cuda_kernel", "takes 1 inputs, got 0");
  expect_invalid(
      [&] { call({x}, {{20}, {3}}, {float32}, {20, 1, 1}, {32, 1, 1}); },
      "cuda_kernel", "1 outputs, but 2 output_shapes and 1 output_dtypes");
  expect_invalid([&] { call({x}, {{-1}}, {float32}, {20, 1, 1}, {32, 1, 1}); },
                 "cuda_kernel", "negative size");
  expect_invalid(
      [&] { call({x}, {{20}}, {complex64}, {20, 1, 1}, {32, 1, 1}); },
      "cuda_kernel", "complex64");
  expect_invalid(
      [&] { call({x}, {{20}}, {float32}, {20, 1, 1}, {2048, 1, 1}); },
      "cuda_kernel", "1 to 1024 threads");
  expect_invalid([&] { call({x}, {{20}}, {float32}, {20, 1, 1}, {1, 1, 65}); },
                 "cuda_kernel", "at most 64 along z");
  expect_invalid([&] { call({x}, {{20}}, {float32}, {-1, 1, 1}, {1, 1, 1}); },
                 "cuda_kernel", "negative size");
  expect_invalid(
      [&] { call({x}, {{20}}, {float32}, {1, 1 << 20, 1}, {1, 1, 1}); },
      "cuda_kernel", "more blocks than CUDA launches");
  expect_invalid(
      [&] {
        call({x}, {{20}}, {float32}, {20, 1, 1}, {32, 1, 1},
             {{"not valid", float32}});
      },
      "cuda_kernel", "template argument name 'not valid'");
  array wide = random_array({1, 1, 1, 1, 1, 1, 1, 1, 2}, float32);
  expect_invalid(
      [&] { call({wide}, {{2}}, {float32}, {2, 1, 1}, {32, 1, 1}); },
      "cuda_kernel", "more than 8 dimensions");
  // A CPU stream (the default device of a CPU-only build, or asked for).
  expect_invalid(
      [&] {
        k({x}, {{20}}, {float32}, {20, 1, 1}, {32, 1, 1}, {}, std::nullopt,
          false, Device::cpu);
      },
      "cuda_kernel", "GPU only");
  expect_invalid(
      [&] {
        fast::precompiled_cuda_kernel("f", "ptx", {x}, {{2}}, {float32}, {},
                                      {1, 1, 1}, {1, 1, 1}, 0, std::nullopt,
                                      false, Device::cpu);
      },
      "precompiled_cuda_kernel", "GPU only");
  expect_invalid(
      [&] {
        fast::precompiled_cuda_kernel("f", "", {x}, {{2}}, {float32}, {},
                                      {1, 1, 1}, {1, 1, 1});
      },
      "precompiled_cuda_kernel", "compiled_source is empty");
}

TEST(FastCustomKernel, GeneratedSignature) {
  array a = random_array({3, 4}, float16);
  array b = random_array({5}, int32);
  array c = array(2.5f);
  // a's shape and ndim are used, b's strides, c (0-d) gets no extras even
  // when named.
  std::vector<fast::CustomKernelShapeInfo> infos = {
      {true, false, true}, {false, true, false}, {true, true, true}};
  auto [src, fn] = cuda::custom_kernel_source(
      "mine", {"a", "b", "c"}, {a, b, c}, infos, {"o1", "o2"},
      {bfloat16, uint8},
      {{"T", float32}, {"N", 4}, {"M", -3}, {"FLAG", true}}, "BODY();",
      "#define HELPER 1");
  EXPECT_EQ(fn, "custom_kernel_mine_float32_4_m3_t");
  auto pos = [&](const std::string& s) { return src.find(s); };
  const std::string sig =
      "__global__ void custom_kernel_mine_float32_4_m3_t(\n"
      "    const __half* a,\n"
      "    const __grid_constant__ Shape a_shape,\n"
      "    const int a_ndim,\n"
      "    const int32_t* b,\n"
      "    const __grid_constant__ Strides b_strides,\n"
      "    const float* c,\n"
      "    __nv_bfloat16* o1,\n"
      "    uint8_t* o2) {\n"
      "  using T = float;\n"
      "  constexpr int N = 4;\n"
      "  constexpr int M = -3;\n"
      "  constexpr bool FLAG = true;\n"
      "BODY();\n}\n";
  EXPECT_NE(pos(sig), std::string::npos) << src;
  EXPECT_NE(pos("#include \"kiln/backend/cuda/device/custom_kernel.cuh\""),
            std::string::npos);
  EXPECT_LT(pos("#define HELPER 1"), pos("namespace kiln::cuda::custom"));
}

} // namespace
} // namespace kiln::test
