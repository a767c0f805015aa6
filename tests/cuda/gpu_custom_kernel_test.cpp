// Custom CUDA kernels (fast.cuda_kernel, fast.precompiled_cuda_kernel) run
// on the GPU against the CPU backend on random inputs: 16-bit and 64-bit
// types, inputs copied row-major or read through their strides, several
// outputs, init_value with atomics, dynamic shared memory past 48 KiB, a 2-d
// grid, compile, the cache telling bodies of one name apart, a compile
// error that leaves the process usable, and a precompiled cubin with
// scalars.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include <cmath>

#include "cuda/custom_kernels.h"
#include "cuda/gpu_fixture.h"
#include "kiln/backend/cuda/jit_module.h"
#include "kiln/ops/fast.h"
#include "kiln/transforms/compile.h"

namespace kiln::test {
namespace {

using GpuCustomKernel = GpuTest;

std::vector<array> run(const fast::CustomKernelFunction& k,
                       const std::vector<array>& in,
                       const std::vector<Shape>& shapes,
                       const std::vector<Dtype>& dtypes,
                       std::tuple<int, int, int> grid,
                       std::tuple<int, int, int> tg,
                       const fast::TemplateArgs& t = {},
                       std::optional<float> init = std::nullopt) {
  auto out = k(in, shapes, dtypes, grid, tg, t, init, false, Device::gpu);
  eval(out);
  return out;
}

TEST_F(GpuCustomKernel, ExpOfEveryFloatType) {
  auto k = fast::cuda_kernel("exp", {"inp", "n"}, {"out"}, custom::exp_body);
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    array x = random_array({37, 29}, dt, -3, 3);
    int n = 37 * 29;
    Dtype compute = dt == float64 ? float64 : float32;
    auto out = run(k, {x, array(n)}, {x.shape()}, {dt}, {n, 1, 1},
                   {128, 1, 1}, {{"T", compute}, {"O", dt}});
    array ref = astype(exp(astype(x, compute), Device::cpu), dt);
    EXPECT_TRUE(all_close(to_doubles(out[0]), to_doubles(ref),
                          tolerance(dt), tolerance(dt)))
        << dtype_name(dt);
  }
}

TEST_F(GpuCustomKernel, InputsCopiedRowMajorOrReadThroughStrides) {
  array base = random_array({12, 10}, float32, -3, 3);
  array t = transpose(base);                         // (10, 12)
  array s = slice(base, Shape{1, 0}, Shape{12, 10}, Shape{2, 3});  // (6, 4)
  array b = broadcast_to(random_array({1, 5}, float32), {7, 5});
  // Row-major copies: the exp body indexes its input as row-major.
  auto k = fast::cuda_kernel("exp_rows", {"inp", "n"}, {"out"},
                             custom::exp_body);
  for (const array& x : {t, s, b}) {
    int n = static_cast<int>(x.size());
    auto out = run(k, {x, array(n)}, {x.shape()}, {float32}, {n, 1, 1},
                   {64, 1, 1}, {{"T", float32}, {"O", float32}});
    EXPECT_TRUE(all_close(to_doubles(out[0]),
                          to_doubles(exp(x, Device::cpu)), 1e-6, 1e-6));
  }
  // Strided reads with ensure_row_contiguous off: the body walks the
  // input's own strides (elem_to_loc).
  auto ks = fast::cuda_kernel("plus_one", {"inp"}, {"out"},
                              custom::strided_body, "", false);
  for (const array& x : {t, s, b}) {
    int n = static_cast<int>(x.size());
    auto out = run(ks, {x}, {x.shape()}, {float32}, {n, 1, 1}, {32, 1, 1});
    EXPECT_TRUE(all_close(to_doubles(out[0]),
                          to_doubles(add(x, array(1.0f), Device::cpu)), 0, 0));
  }
}

TEST_F(GpuCustomKernel, TwoOutputsFromAnInitValueAndAtomics) {
  auto k = fast::cuda_kernel("histogram", {"idx"}, {"counts", "doubled"},
                             custom::histogram_body);
  int n = 5000, bins = 17;
  array idx = random_array({n}, int32, 0, bins);
  auto out = run(k, {idx}, {{bins}, {n}}, {float32, int32}, {n, 1, 1},
                 {256, 1, 1}, {}, 0.5f);
  auto ids = to_doubles(idx);
  std::vector<double> counts(bins, 0.5), doubled(n);
  for (int i = 0; i < n; ++i) {
    counts[static_cast<int>(ids[i])] += 1;
    doubled[i] = 2 * ids[i];
  }
  EXPECT_TRUE(all_close(to_doubles(out[0]), counts, 0, 0));
  EXPECT_TRUE(all_close(to_doubles(out[1]), doubled, 0, 0));
}

TEST_F(GpuCustomKernel, DynamicSharedMemoryPast48KiB) {
  for (int threads : {256, 1024}) {
    // 1024 threads * 4 bytes is only 4 KiB: ask for 64 KiB to exercise the
    // raised limit (the body uses the first blockDim.x floats).
    int shared = threads == 1024 ? 64 * 1024 : threads * 4;
    auto k = fast::cuda_kernel("row_sum", {"x"}, {"sums"},
                               custom::row_sum_body, custom::row_sum_header,
                               true, shared);
    int rows = 37;
    array x = random_array({rows, threads}, float32, -1, 1);
    auto out = run(k, {x}, {{rows}}, {float32}, {rows * threads, 1, 1},
                   {threads, 1, 1}, {{"SCALE", 3}});
    array ref = multiply(sum(x, 1, false, Device::cpu), array(3.0f),
                         Device::cpu);
    // Two float32 orders of summing `threads` values in (-1, 1), times 3:
    // a row whose sum nearly cancels differs by about 1e-5 absolute.
    double atol = 1e-4 * threads / 256;
    EXPECT_TRUE(all_close(to_doubles(out[0]), to_doubles(ref), 1e-5, atol))
        << threads;
  }
}

TEST_F(GpuCustomKernel, TwoDimensionalGrid) {
  auto k = fast::cuda_kernel("transpose", {"inp"}, {"out"},
                             custom::transpose_body);
  array x = random_array({45, 70}, bfloat16);
  auto out = run(k, {x}, {{70, 45}}, {bfloat16}, {70, 45, 1}, {16, 8, 1});
  EXPECT_TRUE(all_close(to_doubles(out[0]),
                        to_doubles(contiguous(transpose(x), false, Device::cpu)),
                        0, 0));
}

TEST_F(GpuCustomKernel, InsideCompile) {
  auto k = fast::cuda_kernel("exp_c", {"inp", "n"}, {"out"}, custom::exp_body);
  auto f = [&](const std::vector<array>& in) {
    int n = static_cast<int>(in[0].size());
    auto y = multiply(in[0], array(2.0f));
    auto out = k({y, array(n)}, {y.shape()}, {float32}, {n, 1, 1},
                 {128, 1, 1}, {{"T", float32}, {"O", float32}}, std::nullopt,
                 false, Device::gpu);
    return std::vector<array>{add(out[0], array(1.0f))};
  };
  auto cf = compile(f);
  array x = random_array({300}, float32, -1, 1);
  auto a = f({x});
  auto b = cf({x});
  eval({a[0], b[0]});
  array ref = add(exp(multiply(x, array(2.0f), Device::cpu), Device::cpu),
                  array(1.0f), Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(a[0]), to_doubles(ref), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(to_doubles(b[0]), to_doubles(ref), 1e-6, 1e-6));
}

TEST_F(GpuCustomKernel, SameNameOtherBodyIsAnotherKernel) {
  const char* body = "if (threadIdx.x == 0) out[0] = VALUE;";
  array x = random_array({1}, float32);
  for (int v : {3, 7}) {
    std::string src = std::string("#define VALUE ") + std::to_string(v) + "\n";
    auto k = fast::cuda_kernel("same_name", {"x"}, {"out"}, body, src);
    auto out = run(k, {x}, {{1}}, {float32}, {1, 1, 1}, {32, 1, 1});
    EXPECT_EQ(to_doubles(out[0])[0], v);
  }
}

TEST_F(GpuCustomKernel, CompileErrorThrowsAndLeavesTheProcessUsable) {
  auto bad = fast::cuda_kernel("bad", {"x"}, {"out"}, "out[0] = nope;");
  array x = random_array({4}, float32);
  auto out = bad({x}, {{1}}, {float32}, {1, 1, 1}, {32, 1, 1}, {},
                 std::nullopt, false, Device::gpu);
  try {
    eval(out);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(same_on_devices(
      [](const std::vector<array>& v, Device d) { return exp(v[0], d); }, {x},
      1e-6));
}

TEST_F(GpuCustomKernel, PrecompiledCubinWithScalars) {
  // A kernel compiled by NVRTC outside kiln's cache (extern "C", so its name
  // is not mangled): out[i] = a * x[i] + b, when `on`.
  cuda::JitKernel src{
      "axpb",
      "extern \"C\" __global__ void axpb(const float* x, float* out, float a,"
      " int b, bool on, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (on && i < n) out[i] = a * x[i] + b;\n}\n",
      "axpb",
      {}};
  std::string cubin = cuda::jit_compile(src, "sm_90");
  int n = 1000;
  array x = random_array({n}, float32, -1, 1);
  auto out = fast::precompiled_cuda_kernel(
      "axpb", cubin, {x}, {{n}}, {float32}, {2.5f, 3, true, n}, {n, 1, 1},
      {128, 1, 1});
  eval(out);
  array ref = add(multiply(x, array(2.5f), Device::cpu), array(3.0f),
                  Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(out[0]), to_doubles(ref), 1e-6, 1e-6));
}

// A name the module lacks raises. (The driver's failed lookup is an API
// error memcheck reports, so scripts/gpu-check sanitize leaves this out.)
TEST_F(GpuCustomKernel, PrecompiledMissingKernelThrows) {
  cuda::JitKernel src{"axpb",
                      "extern \"C\" __global__ void axpb(float* out) {}\n",
                      "axpb",
                      {}};
  std::string cubin = cuda::jit_compile(src, "sm_90");
  array x = random_array({8}, float32, -1, 1);
  try {
    eval(fast::precompiled_cuda_kernel("missing", cubin, {x}, {{8}},
                                       {float32}, {}, {8, 1, 1}, {8, 1, 1}));
    ADD_FAILURE() << "ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
