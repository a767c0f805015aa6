// The GPU's fallbacks: reported in one place (KILN_GPU_STRICT raises) and
// chosen as the graph is built where dtypes and shapes decide them; and no
// primitive evaluates a graph inside its own evaluation.
#include <cstdlib>
#include <string>

#include "kiln/core/gpu_fallback.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/fft.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/conv.h"
#include "kiln/primitives/fft.h"
#include "kiln/primitives/linalg.h"
#include "kiln/transforms/autograd.h"
#include "test_utils.h"

#if KILN_HAS_CUDA
#include "kiln/backend/cuda/cusolver.h"
#endif

namespace kiln::test {
namespace {

TEST(GpuFallback, StrictModeRaisesNamingThePrimitiveAndReason) {
  ::setenv("KILN_GPU_STRICT", "1", 1);
  try {
    detail::gpu_fallback("FFT", "an FFT over 4 axes");
    ADD_FAILURE() << "no exception under KILN_GPU_STRICT=1";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("FFT"), std::string::npos) << what;
    EXPECT_NE(what.find("4 axes"), std::string::npos) << what;
    EXPECT_NE(what.find("KILN_GPU_STRICT"), std::string::npos) << what;
  }
  ::setenv("KILN_GPU_STRICT", "0", 1);
  EXPECT_NO_THROW(detail::gpu_fallback("FFT", "an FFT over 4 axes"));
  ::unsetenv("KILN_GPU_STRICT");
  EXPECT_NO_THROW(detail::gpu_fallback("FFT", "an FFT over 4 axes"));
}

TEST(GpuFallback, PlacedKeepsCpuStreams) {
  auto x = random_array({2, 2, 2, 2}, complex64);
  Stream cpu = default_stream(Device::cpu);
  auto p = detail::placed<FFT>(cpu, {x}, std::vector<int>{0, 1, 2, 3},
                               false, false, FFTNorm::backward, 0);
  EXPECT_EQ(p->stream(), cpu);
}

TEST(GpuFallback, PlacedMovesWhatTheGpuDeclinesToTheCpu) {
  if (!gpu::is_available()) GTEST_SKIP() << "no GPU";
  auto x = random_array({2, 2, 2, 2}, complex64);
  Stream gpu = default_stream(Device::gpu);
  auto four = detail::placed<FFT>(gpu, {x}, std::vector<int>{0, 1, 2, 3},
                                  false, false, FFTNorm::backward, 0);
  EXPECT_EQ(four->device(), Device::cpu); // cuFFT plans take 3 axes
  EXPECT_FALSE(four->gpu_declines({x}).empty());
  auto two = detail::placed<FFT>(gpu, {x}, std::vector<int>{2, 3}, false,
                                 false, FFTNorm::backward, 0);
  EXPECT_EQ(two->device(), Device::gpu);
}

#if KILN_HAS_CUDA
// The linear algebra's GPU fallbacks follow from the dtype and whether
// cuSOLVER loads, so the ops place them on the CPU as the graph is built;
// asked here without a GPU (the primitives only answer).
TEST(GpuFallback, LinalgDeclinesWhatCusolverDoesNotTake) {
  Stream s = default_stream(Device::cpu);
  bool lib = cuda::cusolver::available();
  auto f32 = random_array({4, 4}, float32);
  auto f64 = random_array({4, 4}, float64);
  auto f16 = random_array({4, 4}, float16);
  auto c64 = random_array({4, 4}, complex64);
  for (const array& a : {f16, c64}) {
    std::string why = SVD(s, true).gpu_declines({a});
    EXPECT_NE(why.find(lib ? dtype_name(a.dtype()) : "cuSOLVER"),
              std::string::npos)
        << why;
    EXPECT_FALSE(Inverse(s).gpu_declines({a}).empty());
    EXPECT_FALSE(Eigh(s, 'L', true).gpu_declines({a}).empty());
  }
  EXPECT_EQ(Cholesky(s, false).gpu_declines({f32}).empty(), lib);
  EXPECT_EQ(Solve(s).gpu_declines({f64, f64}).empty(), lib);
  EXPECT_EQ(LUF(s).gpu_declines({f64}).empty(), lib);
  // The GPU's eig takes float32 only.
  std::string why = Eig(s, true).gpu_declines({f64});
  EXPECT_NE(why.find("float32"), std::string::npos) << why;
}

// The GPU's convolutions take up to three spatial axes; conv_general over
// four is placed on the CPU.
TEST(GpuFallback, ConvolutionsPastThreeSpatialAxesAreDeclined) {
  Stream s = default_stream(Device::cpu);
  auto conv = [&](int nd) {
    std::vector<int> one(nd, 1), zero(nd, 0);
    return Convolution(s, one, zero, zero, one, one, 1, false);
  };
  auto x = random_array({1, 3, 3, 3, 3, 2}, float32);
  auto w = random_array({2, 1, 1, 1, 1, 2}, float32);
  std::string why = conv(4).gpu_declines({x, w});
  EXPECT_NE(why.find("4 spatial axes"), std::string::npos) << why;
  EXPECT_TRUE(conv(3).gpu_declines({x, w}).empty());
  EXPECT_TRUE(conv(1).gpu_declines({x, w}).empty());
}
#endif

// The range and count kernels are real: a complex arange is a float64
// range cast, so no GPU stream ever meets a complex Arange.
TEST(GpuFallback, ComplexRangesAreRealRangesCast) {
  auto r = arange(-1.5, 2.0, 0.75, complex64, Device::cpu);
  EXPECT_EQ(r.dtype(), complex64);
  EXPECT_STREQ(r.primitive().name(), "AsType");
  ASSERT_EQ(r.inputs().size(), 1u);
  EXPECT_STREQ(r.inputs()[0].primitive().name(), "Arange");
  EXPECT_EQ(r.inputs()[0].dtype(), float64);
  r.eval();
  ASSERT_EQ(r.size(), 5u);
  const auto* v = r.data<complex64_t>();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(v[i].real(), static_cast<float>(-1.5 + 0.75 * i)) << i;
    EXPECT_EQ(v[i].imag(), 0.0f) << i;
  }
}

TEST(GpuFallback, WeightGradientRunsItsGraphWithoutEvaluatingOne) {
  // ConvolutionWeightGrad's CPU eval is its fallback graph, run node by
  // node (detail::run_nodes), not by a nested eval: the eval lock is not
  // recursive, and a nested eval would raise.
  auto x = random_array({2, 9, 9, 3}, float32);
  auto w = random_array({4, 3, 3, 3}, float32);
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{
        conv2d(in[0], in[1], {1, 1}, {1, 1}, {1, 1}, 1, Device::cpu)};
  };
  auto [outs, grads] =
      vjp(f, {x, w}, {ones({2, 9, 9, 4}, float32, Device::cpu)});
  EXPECT_STREQ(grads[1].primitive().name(), "ConvolutionWeightGrad");
  grads[1].eval();
  EXPECT_TRUE(grads[1].flags().row_contiguous);
  // The gradient of the centre tap sums the input over its positions.
  auto g = to_doubles(grads[1]);
  auto xs = to_doubles(x);
  double want = 0;
  for (size_t i = 0; i < xs.size(); i += 3) want += xs[i];
  EXPECT_NEAR(g[(0 * 9 + 1 * 3 + 1) * 3 + 0], want,
              1e-3 * (1 + std::abs(want)));
}

} // namespace
} // namespace kiln::test
