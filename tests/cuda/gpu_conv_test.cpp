// Convolution on the GPU (cuDNN where present, im2col + cuBLASLt GEMM
// otherwise) against the CPU backend on random inputs: conv1d/2d/3d in
// every GEMM dtype with each parameter (stride, padding, kernel and input
// dilation, groups and depthwise, flip), the transposed convolutions, both
// gradients (convolutions with input dilation and flips, on transposed
// views), vmap (batches as groups), non-contiguous, misaligned, broadcast
// and reversed inputs, 1x1 convolutions, empty and one-element shapes,
// more than 2^16 output rows, long reductions, patch matrices built in
// tiles of rows and of columns, which problems cuDNN takes, and the
// argument errors.
#include <algorithm>

#include "cuda/gpu_fixture.h"
#include "kiln/config.h"

#if KILN_HAS_CUDA
#include "kiln/backend/cuda/conv.h"
#include "kiln/backend/cuda/cudnn_conv.h"
#include "kiln/primitives/conv.h"
#endif

namespace kiln::test {
namespace {

using GpuConv = GpuTest;

// The problems cuDNN takes run on its engines where cuDNN is present, the
// rest on im2col. A BOTH_PATHS_TEST runs its body twice: as GpuConv (the
// default) and as GpuConvIm2col, with cuDNN off.
class GpuConvIm2col : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
#if KILN_HAS_CUDA
    was_enabled_ = cuda::set_cudnn_conv_enabled(false);
#endif
  }
  void TearDown() override {
#if KILN_HAS_CUDA
    cuda::set_cudnn_conv_enabled(was_enabled_);
#endif
  }

 private:
  bool was_enabled_ = true;
};

#define BOTH_PATHS_TEST(name)                    \
  void name##_body();                            \
  TEST_F(GpuConv, name) { name##_body(); }       \
  TEST_F(GpuConvIm2col, name) { name##_body(); } \
  void name##_body()

const std::vector<Dtype> conv_dtypes = {float32, float16, bfloat16, float64};

// float32 GEMMs run without TF32 by default; 16-bit floats accumulate in
// float32 on both devices and round once, so they differ by about an ulp.
double conv_tol(Dtype dt) {
  if (dt == float64) return 1e-9;
  if (dt == float32) return 1e-4;
  return 3e-2;
}

array rnd(const Shape& shape, Dtype dt) {
  return random_array(shape, dt, -1.0, 1.0);
}

// fn on both devices; a forward convolution's GPU result must also have
// been computed on the GPU (in device memory), not by the CPU fallback.
::testing::AssertionResult conv_matches(const DeviceFn& fn,
                                        const std::vector<array>& in, Dtype dt,
                                        bool forward = true, double tol = 0) {
  if (forward) {
    array g = fn(in, Device::gpu);
    g.eval();
    if (g.size() > 0 && !g.on_device()) {
      return ::testing::AssertionFailure() << "ran on the CPU";
    }
  }
  return same_on_devices(fn, in, tol > 0 ? tol : conv_tol(dt));
}

struct Conv1dCase {
  const char* name;
  int stride, padding, dilation, groups;
  Shape x, w;
};

BOTH_PATHS_TEST(Conv1dEveryParameterAndDtype) {
  std::vector<Conv1dCase> cases = {
      {"plain", 1, 0, 1, 1, {2, 37, 5}, {7, 3, 5}},
      {"stride 2", 2, 0, 1, 1, {3, 40, 3}, {4, 3, 3}},
      {"stride 3, unused tail", 3, 0, 1, 1, {1, 20, 2}, {3, 2, 2}},
      {"padding 2", 1, 2, 1, 1, {2, 9, 4}, {3, 3, 4}},
      {"padding beyond kernel", 1, 3, 1, 1, {1, 4, 2}, {2, 2, 2}},
      {"dilation 3", 1, 1, 3, 1, {2, 19, 3}, {5, 3, 3}},
      {"groups 2", 1, 1, 1, 2, {2, 13, 6}, {4, 3, 3}},
      {"groups 3, odd channels", 2, 1, 1, 3, {2, 15, 9}, {9, 4, 3}},
      {"depthwise", 1, 1, 1, 5, {2, 21, 5}, {5, 3, 1}},
      {"depthwise multiplier 2", 1, 0, 2, 4, {3, 17, 4}, {8, 3, 1}},
      {"all", 2, 2, 2, 2, {2, 23, 8}, {6, 3, 4}},
      {"kernel as long as the input", 1, 0, 1, 1, {2, 6, 3}, {2, 6, 3}},
  };
  for (Dtype dt : conv_dtypes) {
    for (const auto& c : cases) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return conv1d(v[0], v[1], c.stride, c.padding, c.dilation, c.groups, d);
      };
      EXPECT_TRUE(conv_matches(fn, {rnd(c.x, dt), rnd(c.w, dt)}, dt))
          << c.name << " " << dtype_name(dt);
    }
  }
}

BOTH_PATHS_TEST(Conv2dAnd3d) {
  using P = std::pair<int, int>;
  struct Case2 {
    P stride, padding, dilation;
    int groups;
    Shape x, w;
  };
  std::vector<Case2> cases2 = {
      {{1, 1}, {0, 0}, {1, 1}, 1, {2, 9, 11, 3}, {5, 3, 3, 3}},
      {{2, 1}, {1, 2}, {1, 1}, 1, {1, 12, 10, 4}, {6, 3, 2, 4}},
      {{1, 2}, {0, 1}, {2, 1}, 1, {2, 13, 9, 2}, {3, 2, 3, 2}},
      {{1, 1}, {1, 1}, {1, 1}, 2, {2, 8, 8, 6}, {4, 3, 3, 3}},
      {{2, 2}, {1, 1}, {1, 1}, 6, {2, 14, 13, 6}, {6, 3, 3, 1}},
      {{3, 2}, {2, 0}, {1, 2}, 2, {1, 17, 16, 4}, {6, 2, 3, 2}},
  };
  for (Dtype dt : conv_dtypes) {
    for (const auto& c : cases2) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return conv2d(v[0], v[1], c.stride, c.padding, c.dilation, c.groups, d);
      };
      EXPECT_TRUE(conv_matches(fn, {rnd(c.x, dt), rnd(c.w, dt)}, dt))
          << "conv2d " << dtype_name(dt) << " groups " << c.groups;
    }
    using T = std::tuple<int, int, int>;
    auto f3 = [](T stride, T padding, T dilation, int groups) {
      return [=](const std::vector<array>& v, Device d) {
        return conv3d(v[0], v[1], stride, padding, dilation, groups, d);
      };
    };
    EXPECT_TRUE(
        conv_matches(f3({1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1),
                     {rnd({2, 5, 6, 7, 3}, dt), rnd({4, 2, 3, 2, 3}, dt)}, dt))
        << "conv3d " << dtype_name(dt);
    EXPECT_TRUE(
        conv_matches(f3({2, 1, 2}, {1, 0, 2}, {1, 2, 1}, 2),
                     {rnd({1, 7, 8, 6, 4}, dt), rnd({6, 3, 2, 3, 2}, dt)}, dt))
        << "conv3d strided/padded/dilated/grouped " << dtype_name(dt);
  }
}

BOTH_PATHS_TEST(InputDilationFlipAndAsymmetricPadding) {
  for (Dtype dt : conv_dtypes) {
    for (bool flip : {false, true}) {
      auto f1 = [&](const std::vector<array>& v, Device d) {
        return conv_general(v[0], v[1], {2}, {1}, {3}, {2}, {3}, 1, flip, d);
      };
      EXPECT_TRUE(
          conv_matches(f1, {rnd({2, 9, 3}, dt), rnd({4, 3, 3}, dt)}, dt))
          << "1d " << dtype_name(dt) << " flip " << flip;
      auto f2 = [&](const std::vector<array>& v, Device d) {
        return conv_general(v[0], v[1], {1, 2}, {2, 0}, {0, 1}, {1, 2}, {2, 3},
                            2, flip, d);
      };
      EXPECT_TRUE(
          conv_matches(f2, {rnd({2, 6, 5, 4}, dt), rnd({4, 3, 2, 2}, dt)}, dt))
          << "2d " << dtype_name(dt) << " flip " << flip;
      auto f3 = [&](const std::vector<array>& v, Device d) {
        return conv_general(v[0], v[1], {1, 1, 2}, {1, 0, 2}, {0, 2, 1},
                            {1, 1, 2}, {2, 1, 2}, 1, flip, d);
      };
      EXPECT_TRUE(conv_matches(
          f3, {rnd({1, 4, 5, 4, 3}, dt), rnd({2, 2, 3, 2, 3}, dt)}, dt))
          << "3d " << dtype_name(dt) << " flip " << flip;
    }
  }
}

BOTH_PATHS_TEST(TransposedConvolutions) {
  for (Dtype dt : conv_dtypes) {
    struct Case1 {
      int stride, padding, dilation, output_padding, groups;
    };
    // The last two pad by more than the dilated kernel: negative padding
    // (cropping) inside the convolution.
    for (auto c : std::vector<Case1>{{1, 0, 1, 0, 1},
                                     {2, 1, 1, 1, 1},
                                     {3, 2, 2, 0, 2},
                                     {2, 3, 1, 1, 1},
                                     {1, 4, 1, 0, 2}}) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return conv_transpose1d(v[0], v[1], c.stride, c.padding, c.dilation,
                                c.output_padding, c.groups, d);
      };
      EXPECT_TRUE(conv_matches(
          fn, {rnd({2, 11, 4}, dt), rnd({6, 3, 4 / c.groups}, dt)}, dt))
          << "conv_transpose1d " << dtype_name(dt) << " stride " << c.stride
          << " padding " << c.padding;
    }
    auto f2 = [&](const std::vector<array>& v, Device d) {
      return conv_transpose2d(v[0], v[1], {2, 1}, {1, 0}, {1, 2}, {1, 0}, 1, d);
    };
    EXPECT_TRUE(
        conv_matches(f2, {rnd({2, 5, 7, 3}, dt), rnd({4, 3, 2, 3}, dt)}, dt))
        << "conv_transpose2d " << dtype_name(dt);
    auto f2g = [&](const std::vector<array>& v, Device d) {
      return conv_transpose2d(v[0], v[1], {2, 2}, {1, 1}, {1, 1}, {0, 1}, 2, d);
    };
    EXPECT_TRUE(
        conv_matches(f2g, {rnd({1, 6, 5, 4}, dt), rnd({4, 3, 3, 2}, dt)}, dt))
        << "conv_transpose2d groups " << dtype_name(dt);
    auto f3 = [&](const std::vector<array>& v, Device d) {
      return conv_transpose3d(v[0], v[1], {2, 1, 2}, {0, 1, 1}, {1, 1, 1},
                              {1, 0, 0}, 1, d);
    };
    EXPECT_TRUE(conv_matches(
        f3, {rnd({1, 3, 4, 3, 2}, dt), rnd({3, 2, 3, 2, 2}, dt)}, dt))
        << "conv_transpose3d " << dtype_name(dt);
  }
}

// The gradients of a convolution w.r.t. its input and its weight, built and
// evaluated on one device: convolutions of the cotangent (input-dilated by
// the stride, flipped) and of the transposed input with the cotangent as
// the kernel, whose operands are transposed and reshaped views.
using ConvFn = std::function<array(const array&, const array&, Device)>;

void expect_grads_match(const std::string& name, const ConvFn& conv,
                        const Shape& xs, const Shape& ws, Dtype dt) {
  array x = rnd(xs, dt), w = rnd(ws, dt);
  array y = conv(x, w, Device::cpu);
  array cot = rnd(y.shape(), dt);
  for (int arg : {0, 1}) {
    auto fn = [&](const std::vector<array>& v, Device d) {
      auto f = [&](const std::vector<array>& p) {
        return std::vector<array>{conv(p[0], p[1], d)};
      };
      return vjp(f, {v[0], v[1]}, {v[2]}).second[arg];
    };
    EXPECT_TRUE(conv_matches(fn, {x, w, cot}, dt, false))
        << name << (arg == 0 ? " d/dinput " : " d/dweight ") << dtype_name(dt);
  }
}

BOTH_PATHS_TEST(GradientsOnTheGpu) {
  for (Dtype dt : conv_dtypes) {
    expect_grads_match(
        "conv1d stride/padding/dilation/groups",
        [](const array& x, const array& w, Device d) {
          return conv1d(x, w, 2, 1, 2, 2, d);
        },
        {2, 17, 4}, {6, 3, 2}, dt);
    expect_grads_match(
        "conv1d depthwise",
        [](const array& x, const array& w, Device d) {
          return conv1d(x, w, 1, 1, 1, 3, d);
        },
        {2, 9, 3}, {3, 3, 1}, dt);
    expect_grads_match(
        "conv2d",
        [](const array& x, const array& w, Device d) {
          return conv2d(x, w, {2, 1}, {1, 2}, {1, 2}, 1, d);
        },
        {2, 9, 8, 3}, {4, 3, 2, 3}, dt);
    expect_grads_match(
        "conv_transpose1d",
        [](const array& x, const array& w, Device d) {
          return conv_transpose1d(x, w, 2, 1, 1, 1, 1, d);
        },
        {2, 6, 3}, {4, 3, 3}, dt);
    expect_grads_match(
        "conv_general input dilation and flip",
        [](const array& x, const array& w, Device d) {
          return conv_general(x, w, {1, 2}, {1, 0}, {2, 1}, {1, 1}, {2, 1}, 1,
                              true, d);
        },
        {1, 5, 6, 2}, {3, 2, 3, 2}, dt);
  }
}

BOTH_PATHS_TEST(VmapTurnsBatchesIntoGroups) {
  for (Dtype dt : {float32, bfloat16}) {
    for (std::vector<int> axes : {std::vector<int>{0, -1}, {-1, 0}, {0, 0}}) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        auto f = [&](const std::vector<array>& p) {
          return std::vector<array>{conv1d(p[0], p[1], 1, 1, 1, 2, d)};
        };
        return vmap(f, axes)({v[0], v[1]})[0];
      };
      Shape xs = {2, 9, 4}, ws = {4, 3, 2};
      if (axes[0] == 0) xs.insert(xs.begin(), 3);
      if (axes[1] == 0) ws.insert(ws.begin(), 3);
      EXPECT_TRUE(conv_matches(fn, {rnd(xs, dt), rnd(ws, dt)}, dt, false))
          << dtype_name(dt) << " in_axes " << axes[0] << ", " << axes[1];
    }
  }
}

BOTH_PATHS_TEST(NonContiguousInputsAndWeights) {
  for (Dtype dt : conv_dtypes) {
    auto fn = [](const std::vector<array>& v, Device d) {
      return conv2d(v[0], v[1], {1, 2}, {1, 1}, {1, 1}, 2, d);
    };
    Shape xs = {2, 7, 9, 6}, ws = {4, 3, 2, 3};
    array x = rnd(xs, dt), w = rnd(ws, dt);
    array wide = rnd({2, 7, 9, 13}, dt);
    array tall = rnd({2, 14, 18, 6}, dt);
    std::vector<std::pair<std::string, array>> inputs = {
        {"transposed", as_transposed(x)},
        // Channels 1..6 of 13: the first element is not 16-byte aligned.
        {"channel slice", slice(wide, Shape{0, 0, 0, 1}, Shape{2, 7, 9, 7})},
        {"every other channel",
         slice(wide, Shape{0, 0, 0, 0}, Shape{2, 7, 9, 12}, Shape{1, 1, 1, 2})},
        {"strided spatial", slice(tall, Shape{0, 0, 0, 0}, Shape{2, 14, 18, 6},
                                  Shape{1, 2, 2, 1})},
        {"reversed spatial",
         slice(x, Shape{0, 6, 0, 0}, Shape{2, -8, 9, 6}, Shape{1, -1, 1, 1})},
        {"broadcast batch", broadcast_to(rnd({1, 7, 9, 6}, dt), xs)},
        {"broadcast channels", broadcast_to(rnd({2, 7, 9, 1}, dt), xs)},
    };
    for (const auto& [name, xi] : inputs) {
      ASSERT_EQ(xi.shape(), xs) << name;
      EXPECT_TRUE(conv_matches(fn, {xi, w}, dt))
          << name << " " << dtype_name(dt);
    }
    // Weights the GEMM cannot read in place are copied row-major first.
    array wide_w = rnd({4, 3, 2, 5}, dt);
    for (const auto& [name, wi] : std::vector<std::pair<std::string, array>>{
             {"transposed weight", as_transposed(w)},
             {"sliced weight",
              slice(wide_w, Shape{0, 0, 0, 2}, Shape{4, 3, 2, 5})},
             {"broadcast weight", broadcast_to(rnd({1, 3, 2, 3}, dt), ws)}}) {
      ASSERT_EQ(wi.shape(), ws) << name;
      EXPECT_TRUE(conv_matches(fn, {x, wi}, dt))
          << name << " " << dtype_name(dt);
    }
  }
}

BOTH_PATHS_TEST(OneByOneConvolutions) {
  for (Dtype dt : conv_dtypes) {
    // A plain GEMM on the input: groups 1 and 3 (each group's channels at
    // their offset), then layouts and parameters that need im2col.
    auto fn = [](int stride, int padding, int groups) {
      return [=](const std::vector<array>& v, Device d) {
        return conv2d(v[0], v[1], {stride, stride}, {padding, padding}, {1, 1},
                      groups, d);
      };
    };
    array x = rnd({2, 5, 7, 6}, dt);
    array w1 = rnd({5, 1, 1, 6}, dt), w3 = rnd({9, 1, 1, 2}, dt);
    EXPECT_TRUE(conv_matches(fn(1, 0, 1), {x, w1}, dt)) << dtype_name(dt);
    EXPECT_TRUE(conv_matches(fn(1, 0, 3), {x, w3}, dt)) << dtype_name(dt);
    EXPECT_TRUE(conv_matches(fn(1, 0, 1), {as_transposed(x), w1}, dt))
        << "transposed " << dtype_name(dt);
    EXPECT_TRUE(conv_matches(fn(2, 0, 1), {x, w1}, dt))
        << "stride 2 " << dtype_name(dt);
    EXPECT_TRUE(conv_matches(fn(1, 1, 3), {x, w3}, dt))
        << "padding 1 " << dtype_name(dt);
    auto flipped = [](const std::vector<array>& v, Device d) {
      return conv_general(v[0], v[1], {}, {}, {}, {}, {}, 1, true, d);
    };
    EXPECT_TRUE(conv_matches(flipped, {x, w1}, dt))
        << "flipped " << dtype_name(dt);
  }
}

BOTH_PATHS_TEST(EdgeSizes) {
  for (Dtype dt : conv_dtypes) {
    auto plain = [](const std::vector<array>& v, Device d) {
      return conv1d(v[0], v[1], 1, 0, 1, 1, d);
    };
    // Empty batch, no output channels, one element.
    EXPECT_TRUE(
        conv_matches(plain, {rnd({0, 10, 4}, dt), rnd({6, 3, 4}, dt)}, dt))
        << "empty batch " << dtype_name(dt);
    EXPECT_TRUE(
        conv_matches(plain, {rnd({2, 10, 4}, dt), rnd({0, 3, 4}, dt)}, dt))
        << "no output channels " << dtype_name(dt);
    EXPECT_TRUE(
        conv_matches(plain, {rnd({1, 1, 1}, dt), rnd({1, 1, 1}, dt)}, dt))
        << "one element " << dtype_name(dt);
    // No input channels: every sum is empty, the output all zeros.
    array z =
        conv1d(rnd({2, 5, 0}, dt), rnd({3, 2, 0}, dt), 1, 0, 1, 1, Device::gpu);
    EXPECT_EQ(z.shape(), (Shape{2, 4, 3}));
    EXPECT_EQ(to_doubles(z), std::vector<double>(24, 0.0)) << dtype_name(dt);
    // An empty input reached only by padding.
    auto padded = [](const std::vector<array>& v, Device d) {
      return conv1d(v[0], v[1], 1, 2, 1, 1, d);
    };
    EXPECT_TRUE(
        conv_matches(padded, {rnd({2, 0, 3}, dt), rnd({2, 1, 3}, dt)}, dt))
        << "padding only " << dtype_name(dt);
  }
}

BOTH_PATHS_TEST(ManyRowsAndLongReductions) {
  for (Dtype dt : conv_dtypes) {
    // 3 * 29998 output rows (> 2^16), channels not a multiple of 8.
    auto f1 = [](const std::vector<array>& v, Device d) {
      return conv1d(v[0], v[1], 1, 0, 1, 1, d);
    };
    EXPECT_TRUE(
        conv_matches(f1, {rnd({3, 30000, 5}, dt), rnd({7, 3, 5}, dt)}, dt))
        << "many rows " << dtype_name(dt);
    // kernel_size * C_in = 2304 products per output.
    auto f2 = [](const std::vector<array>& v, Device d) {
      return conv2d(v[0], v[1], {1, 1}, {1, 1}, {1, 1}, 1, d);
    };
    EXPECT_TRUE(conv_matches(
        f2, {rnd({2, 10, 12, 256}, dt), rnd({33, 3, 3, 256}, dt)}, dt))
        << "long reduction " << dtype_name(dt);
  }
}

BOTH_PATHS_TEST(MixedInputDtypesPromote) {
  auto fn = [](const std::vector<array>& v, Device d) {
    return conv1d(v[0], v[1], 1, 1, 1, 1, d);
  };
  array x = rnd({2, 10, 4}, float16), w = rnd({6, 3, 4}, float32);
  EXPECT_EQ(fn({x, w}, Device::gpu).dtype(), float32);
  EXPECT_TRUE(conv_matches(fn, {x, w}, float32));
  EXPECT_TRUE(conv_matches(fn, {x, rnd({6, 3, 4}, bfloat16)}, float32));
}

BOTH_PATHS_TEST(AgainstHandComputedValues) {
  // Independent of the CPU backend: x = 1..6 over (1, 6, 1), kernel
  // [1, 0, -1] with padding 1: out[i] = x[i - 1] - x[i + 1].
  array x({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {1, 6, 1});
  array w({1.0f, 0.0f, -1.0f}, {1, 3, 1});
  array y = conv1d(x, w, 1, 1, 1, 1, Device::gpu);
  EXPECT_EQ(to_doubles(y), (std::vector<double>{-2, -2, -2, -2, -2, 5}));
  // Flipped: out[i] = x[i + 1] - x[i - 1].
  array yf = conv_general(x, w, {1}, {1}, {1}, {1}, {1}, 1, true, Device::gpu);
  EXPECT_EQ(to_doubles(yf), (std::vector<double>{2, 2, 2, 2, 2, -5}));
}

#if KILN_HAS_CUDA
// Where cuDNN is present, convolutions of float16/bfloat16/float32 run on
// it (its call count moves by one per GPU evaluation) and agree with the
// CPU: forward ones without negative padding (long kernels too), input-
// dilated ones of unit stride and kernels of up to 16 taps per axis, any
// groups (data gradients: transposed convolutions, a strided
// convolution's input gradient), and weight gradients. The others run on
// im2col (the count stays), as do 1x1 convolutions (a GEMM on the input).
TEST_F(GpuConv, CudnnTakesItsProblems) {
  if (!cuda::cudnn_conv_available()) GTEST_SKIP() << "no cuDNN";
  auto general = [](std::vector<int> stride, std::vector<int> lo,
                    std::vector<int> hi, std::vector<int> kd,
                    std::vector<int> id, int groups, bool flip) {
    return [=](const std::vector<array>& v, Device d) {
      return conv_general(v[0], v[1], stride, lo, hi, kd, id, groups, flip,
                          d);
    };
  };
  using R = cuda::CudnnConvRoute;
  struct Case {
    const char* name;
    DeviceFn fn;
    Shape x, w;
    Dtype dt;
    R route;
  };
  std::vector<Case> cases = {
      {"conv2d 3x3, padding 1", general({1, 1}, {1, 1}, {1, 1}, {1, 1},
                                        {1, 1}, 1, false),
       {2, 16, 16, 32}, {64, 3, 3, 32}, float16, R::forward},
      {"conv2d stride 2", general({2, 2}, {1, 1}, {0, 0}, {1, 1}, {1, 1}, 1,
                                  false),
       {2, 15, 17, 16}, {24, 3, 3, 16}, bfloat16, R::forward},
      {"depthwise", general({1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 16, false),
       {2, 12, 12, 16}, {16, 3, 3, 1}, bfloat16, R::forward},
      {"grouped, dilated", general({1, 1}, {2, 2}, {2, 2}, {2, 2}, {1, 1}, 4,
                                   false),
       {1, 11, 13, 32}, {16, 3, 3, 8}, float16, R::forward},
      {"conv1d", general({2}, {2}, {1}, {2}, {1}, 1, false), {2, 40, 8},
       {6, 5, 8}, float32, R::forward},
      {"conv3d", general({1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1},
                         {1, 1, 1}, 1, false),
       {1, 6, 7, 8, 8}, {8, 3, 3, 3, 8}, float16, R::forward},
      {"flipped, asymmetric padding", general({1, 2}, {2, 0}, {0, 1}, {1, 2},
                                              {1, 1}, 1, true),
       {2, 9, 10, 16}, {8, 3, 2, 16}, float16, R::forward},
      {"float64", general({1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false),
       {2, 8, 8, 8}, {8, 3, 3, 8}, float64, R::none},
      {"input dilation (a data gradient)",
       general({1, 1}, {1, 1}, {1, 1}, {1, 1}, {2, 2}, 1, false),
       {2, 8, 8, 16}, {8, 3, 3, 16}, float16, R::data_grad},
      {"transposed conv2d, stride 2",
       [](const std::vector<array>& v, Device d) {
         return conv_transpose2d(v[0], v[1], {2, 2}, {1, 1}, {1, 1}, {1, 1},
                                 1, d);
       },
       {2, 7, 7, 16}, {8, 3, 3, 16}, bfloat16, R::data_grad},
      {"transposed conv1d, depthwise",
       [](const std::vector<array>& v, Device d) {
         return conv_transpose1d(v[0], v[1], 3, 1, 2, 0, 8, d);
       },
       {2, 9, 8}, {8, 3, 1}, float32, R::data_grad},
      {"input dilation and stride 2",
       general({2, 2}, {1, 1}, {1, 1}, {1, 1}, {2, 2}, 1, false),
       {2, 8, 8, 16}, {8, 3, 3, 16}, float16, R::none},
      {"input dilation, two groups",
       general({1, 1}, {1, 1}, {1, 1}, {1, 1}, {2, 2}, 2, false),
       {2, 8, 8, 16}, {8, 3, 3, 8}, float16, R::data_grad},
      {"input dilation, four groups of 2 in, 3 out",
       general({1, 1}, {2, 1}, {1, 2}, {1, 1}, {2, 2}, 4, true),
       {2, 7, 8, 8}, {12, 3, 3, 2}, bfloat16, R::data_grad},
      {"negative padding (a transposed convolution padded past its kernel)",
       [](const std::vector<array>& v, Device d) {
         return conv_transpose1d(v[0], v[1], 1, 4, 1, 0, 1, d);
       },
       {2, 20, 8}, {8, 3, 8}, float32, R::none},
      {"17 taps", general({1}, {0}, {0}, {1}, {1}, 1, false), {2, 40, 8},
       {8, 17, 8}, float16, R::forward},
      {"31 taps, depthwise (a Conformer block)",
       general({1}, {15}, {15}, {1}, {1}, 16, false), {2, 60, 16},
       {16, 31, 1}, bfloat16, R::forward},
      {"1x1", general({1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1, false),
       {2, 8, 8, 16}, {32, 1, 1, 16}, float16, R::none},
      // 20 taps dilated by 2 over 41 + 1 padded inputs, stride 2: 2
      // outputs, the last input unread (cuDNN's x cut short by one).
      {"20 taps, 2 outputs (a weight gradient's shape)",
       general({2}, {1}, {0}, {2}, {1}, 1, false), {8, 41, 16}, {16, 20, 16},
       bfloat16, R::weight_grad},
      {"the same, two groups", general({2}, {1}, {0}, {2}, {1}, 2, false),
       {8, 41, 16}, {16, 20, 8}, bfloat16, R::weight_grad},
      {"the same, flipped", general({2}, {1}, {0}, {2}, {1}, 1, true),
       {8, 41, 16}, {16, 20, 16}, bfloat16, R::forward},
      {"20 taps, 21 outputs", general({1}, {0}, {0}, {1}, {1}, 1, false),
       {2, 40, 8}, {8, 20, 8}, float32, R::forward},
  };
  // conv_matches evaluates each case on the GPU twice (its placement check
  // and same_on_devices): two calls per case on its route.
  const int runs = 2;
  for (const auto& c : cases) {
    auto before = cuda::cudnn_conv_counts();
    EXPECT_TRUE(conv_matches(c.fn, {rnd(c.x, c.dt), rnd(c.w, c.dt)}, c.dt))
        << c.name << " " << dtype_name(c.dt);
    auto after = cuda::cudnn_conv_counts();
    EXPECT_EQ(after.calls - before.calls, c.route == R::none ? 0 : runs)
        << c.name;
    EXPECT_EQ(after.forward - before.forward, c.route == R::forward ? runs : 0)
        << c.name;
    EXPECT_EQ(after.data_grad - before.data_grad,
              c.route == R::data_grad ? runs : 0)
        << c.name;
    EXPECT_EQ(after.weight_grad - before.weight_grad,
              c.route == R::weight_grad ? runs : 0)
        << c.name;
  }
  // A second call of the same problem reuses its graph.
  auto before = cuda::cudnn_conv_counts();
  EXPECT_TRUE(conv_matches(cases[0].fn,
                           {rnd(cases[0].x, float16), rnd(cases[0].w, float16)},
                           float16));
  auto after = cuda::cudnn_conv_counts();
  EXPECT_EQ(after.calls - before.calls, runs);
  EXPECT_EQ(after.graphs_built, before.graphs_built);
  // A training step's gradients: the input's (a flipped convolution of
  // the cotangent) and the weight's (the batch of 8 as channels, the
  // cotangent as a 10x10 kernel) both on cuDNN.
  before = cuda::cudnn_conv_counts();
  expect_grads_match(
      "conv2d on cuDNN",
      [](const array& x, const array& w, Device d) {
        return conv2d(x, w, {1, 1}, {1, 1}, {1, 1}, 1, d);
      },
      {8, 10, 10, 16}, {16, 3, 3, 16}, float16);
  after = cuda::cudnn_conv_counts();
  EXPECT_GE(after.calls - before.calls, 2);
  // A 20 x 20 output: the weight's gradient (a 20 x 20 kernel, a 3 x 3
  // output) runs as cuDNN's wgrad.
  before = cuda::cudnn_conv_counts();
  expect_grads_match(
      "conv2d, the weight gradient on cuDNN's wgrad",
      [](const array& x, const array& w, Device d) {
        return conv2d(x, w, {1, 1}, {1, 1}, {1, 1}, 1, d);
      },
      {4, 20, 20, 16}, {16, 3, 3, 16}, bfloat16);
  after = cuda::cudnn_conv_counts();
  EXPECT_GE(after.weight_grad - before.weight_grad, 1);
  // Strided: the input's gradient is an input-dilated convolution.
  before = cuda::cudnn_conv_counts();
  expect_grads_match(
      "conv2d stride 2 on cuDNN",
      [](const array& x, const array& w, Device d) {
        return conv2d(x, w, {2, 2}, {1, 1}, {1, 1}, 1, d);
      },
      {8, 11, 12, 16}, {16, 3, 3, 16}, bfloat16);
  expect_grads_match(
      "depthwise conv2d stride 2 on cuDNN",
      [](const array& x, const array& w, Device d) {
        return conv2d(x, w, {2, 2}, {1, 1}, {1, 1}, 16, d);
      },
      {8, 12, 12, 16}, {16, 3, 3, 1}, float16);
  after = cuda::cudnn_conv_counts();
  EXPECT_GE(after.data_grad - before.data_grad, 2);
  // Depthwise and grouped weight gradients: cuDNN's wgrad with groups.
  before = cuda::cudnn_conv_counts();
  expect_grads_match(
      "depthwise conv2d, the weight gradient on cuDNN's wgrad",
      [](const array& x, const array& w, Device d) {
        return conv2d(x, w, {1, 1}, {1, 1}, {1, 1}, 16, d);
      },
      {4, 20, 18, 16}, {16, 3, 3, 1}, bfloat16);
  expect_grads_match(
      "grouped conv1d, the weight gradient on cuDNN's wgrad",
      [](const array& x, const array& w, Device d) {
        return conv1d(x, w, 2, 2, 1, 4, d);
      },
      {4, 50, 32}, {16, 5, 8}, float32);
  after = cuda::cudnn_conv_counts();
  EXPECT_GE(after.weight_grad - before.weight_grad, 2);
}

// A weight's gradient runs as cuDNN's wgrad of the forward convolution
// itself (one call, no other cuDNN route), reading the input and the
// cotangent as they are: groups (ResNeXt's grouped stride-2 layer, a
// depthwise one), a 31-tap depthwise conv1d, flips with kernel dilation and
// asymmetric padding, a stride that leaves the last inputs unread (x cut
// short), 3 axes, and a transposed input (copied first). Float64 and a
// transposed convolution's weight (input dilation) take the fallback's
// convolution instead, with the same results.
TEST_F(GpuConv, WeightGradientsAsCudnnWgrad) {
  if (!cuda::cudnn_conv_available()) GTEST_SKIP() << "no cuDNN";
  auto general = [](std::vector<int> stride, std::vector<int> lo,
                    std::vector<int> hi, std::vector<int> kd, int groups,
                    bool flip) {
    return [=](const array& x, const array& w, Device d) {
      return conv_general(x, w, stride, lo, hi, kd, {}, groups, flip, d);
    };
  };
  struct Case {
    const char* name;
    ConvFn conv;
    array x;
    Shape w;
    Dtype dt;
    bool direct;
  };
  auto x_of = [](const Shape& shape, Dtype dt) { return rnd(shape, dt); };
  std::vector<Case> cases = {
      {"grouped 3x3 stride 2", general({2, 2}, {1, 1}, {1, 1}, {1, 1}, 4,
                                       false),
       x_of({2, 12, 12, 32}, bfloat16), {32, 3, 3, 8}, bfloat16, true},
      {"depthwise 3x3", general({1, 1}, {1, 1}, {1, 1}, {1, 1}, 16, false),
       x_of({2, 10, 10, 16}, float16), {16, 3, 3, 1}, float16, true},
      {"31-tap depthwise conv1d", general({1}, {15}, {15}, {1}, 16, false),
       x_of({2, 40, 16}, bfloat16), {16, 31, 1}, bfloat16, true},
      {"flipped, dilated, asymmetric padding",
       general({1, 2}, {2, 0}, {0, 1}, {1, 2}, 1, true),
       x_of({2, 9, 10, 8}, float16), {4, 3, 2, 8}, float16, true},
      {"stride 3, last inputs unread", general({3}, {0}, {0}, {1}, 1, false),
       x_of({2, 20, 8}, float32), {8, 4, 8}, float32, true},
      {"conv3d", general({1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, false),
       x_of({1, 5, 6, 7, 8}, float16), {8, 3, 3, 3, 8}, float16, true},
      {"transposed input", general({2}, {1}, {1}, {1}, 2, false),
       transpose(x_of({8, 17, 2}, float32), {2, 1, 0}), {6, 3, 4}, float32,
       true},
      {"float64", general({1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, false),
       x_of({2, 6, 6, 4}, float64), {4, 3, 3, 2}, float64, false},
      {"transposed convolution",
       [](const array& x, const array& w, Device d) {
         return conv_transpose2d(x, w, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, d);
       },
       x_of({2, 5, 5, 8}, bfloat16), {8, 3, 3, 8}, bfloat16, false},
  };
  for (const auto& c : cases) {
    array w = rnd(c.w, c.dt);
    array cot = rnd(c.conv(c.x, w, Device::cpu).shape(), c.dt);
    auto fn = [&](const std::vector<array>& v, Device d) {
      auto f = [&](const std::vector<array>& p) {
        return std::vector<array>{c.conv(v[0], p[0], d)};
      };
      return vjp(f, {v[1]}, {v[2]}).second[0];
    };
    auto before = cuda::cudnn_conv_counts();
    EXPECT_TRUE(same_on_devices(fn, {c.x, w, cot}, conv_tol(c.dt))) << c.name;
    auto after = cuda::cudnn_conv_counts();
    if (c.direct) {
      EXPECT_EQ(after.weight_grad - before.weight_grad, 1) << c.name;
      EXPECT_EQ(after.calls - before.calls, 1) << c.name;
    } else if (c.dt == float64) {
      EXPECT_EQ(after.calls, before.calls) << c.name;
    }
  }
}

// Lowers the scratch limit for a scope, so small inputs take the tiled
// paths.
struct ScratchLimit {
  explicit ScratchLimit(size_t bytes) { cuda::set_conv_scratch_limit(bytes); }
  ~ScratchLimit() { cuda::set_conv_scratch_limit(0); }
};

// On im2col: cuDNN would take these problems whole.
TEST_F(GpuConvIm2col, PatchMatrixInTilesOfRowsAndColumns) {
  for (Dtype dt : conv_dtypes) {
    auto f2 = [](const std::vector<array>& v, Device d) {
      return conv2d(v[0], v[1], {1, 2}, {1, 1}, {1, 1}, 2, d);
    };
    array x = rnd({3, 9, 11, 32}, dt), w = rnd({6, 3, 3, 16}, dt);
    {
      // 2 groups * 144 columns per row: tiles of a few rows each, the last
      // one shorter.
      ScratchLimit limit(8 * 1024);
      EXPECT_TRUE(conv_matches(f2, {x, w}, dt))
          << "row tiles " << dtype_name(dt);
    }
    // Split reductions: float16/bfloat16 accumulate the chunks in float32
    // (patches included) and round once, so the usual tolerances hold.
    {
      // One row of both groups (288 values) exceeds the scratch: the
      // reduction is split into column chunks (128 + 16; float32 patches
      // of 64 columns for float16/bfloat16), one output row per tile.
      ScratchLimit limit(256 * dt.size);
      EXPECT_TRUE(conv_matches(f2, {x, w}, dt))
          << "column chunks " << dtype_name(dt);
    }
    {
      // Long rows split into chunks of 4096 columns (9 * 2048 = 4 * 4096 +
      // 2048), two output rows per tile.
      ScratchLimit limit(2 * 4096 * std::max<size_t>(dt.size, 4));
      auto f1 = [](const std::vector<array>& v, Device d) {
        return conv1d(v[0], v[1], 1, 4, 1, 1, d);
      };
      EXPECT_TRUE(
          conv_matches(f1, {rnd({2, 20, 2048}, dt), rnd({3, 9, 2048}, dt)}, dt))
          << "long rows " << dtype_name(dt);
    }
  }
  // The limit is restored.
  EXPECT_EQ(cuda::conv_scratch_limit(), size_t(256) << 20);
}
#endif // KILN_HAS_CUDA

#if KILN_HAS_CUDA
// Which cuDNN operation each Convolution node maps to (cudnn_conv_route, a
// function of the node's parameters and shapes alone), checked without a
// GPU: the problems a forward pass, a transposed convolution and both
// gradients of a training step build, and those that stay on im2col.
TEST(CudnnConvRoute, ByParametersAndShapes) {
  using R = cuda::CudnnConvRoute;
  struct Case {
    const char* name;
    Shape x, w;
    std::vector<int> stride, lo, hi, kd, id;
    int groups;
    bool flip;
    Dtype dt;
    R route;
  };
  const std::vector<Case> cases = {
      {"3x3", {8, 56, 56, 64}, {64, 3, 3, 64}, {1, 1}, {1, 1}, {1, 1},
       {1, 1}, {1, 1}, 1, false, bfloat16, R::forward},
      {"conv1d, 16 taps", {2, 40, 8}, {8, 16, 8}, {1}, {0}, {0}, {1}, {1}, 1,
       false, float32, R::forward},
      {"conv3d depthwise", {1, 6, 7, 8, 8}, {8, 3, 3, 3, 1}, {1, 1, 1},
       {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 8, false, float16,
       R::forward},
      {"flipped (an input gradient)", {8, 56, 56, 64}, {64, 3, 3, 64},
       {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, true, bfloat16,
       R::forward},
      {"float64", {2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}, {1, 1}, {1, 1},
       {1, 1}, 1, false, float64, R::none},
      {"integers", {2, 8, 8}, {8, 3, 8}, {1}, {1}, {1}, {1}, {1}, 1, false,
       int32, R::none},
      {"negative padding", {2, 20, 8}, {8, 3, 8}, {1}, {-1}, {0}, {1}, {1}, 1,
       false, float32, R::none},
      {"a strided conv's input gradient", {8, 28, 28, 64}, {64, 3, 3, 64},
       {1, 1}, {1, 1}, {2, 2}, {1, 1}, {2, 2}, 1, true, bfloat16,
       R::data_grad},
      {"the same, depthwise", {8, 28, 28, 64}, {64, 3, 3, 1}, {1, 1},
       {1, 1}, {2, 2}, {1, 1}, {2, 2}, 64, true, bfloat16, R::data_grad},
      {"the same, two groups", {8, 28, 28, 64}, {64, 3, 3, 32}, {1, 1},
       {1, 1}, {2, 2}, {1, 1}, {2, 2}, 2, true, bfloat16, R::data_grad},
      {"input dilation with stride", {2, 8, 8, 16}, {8, 3, 3, 16}, {2, 2},
       {1, 1}, {1, 1}, {1, 1}, {2, 2}, 1, false, float16, R::none},
      {"padding past the kernel's span", {2, 8, 16}, {8, 3, 16}, {1}, {3},
       {1}, {1}, {2}, 1, false, float16, R::none},
      // The weight gradient of the 3x3 above: x as (C_in, S, N), the
      // cotangent (C_out, O, N) as a 56x56 kernel, a 3x3 output.
      {"a 3x3's weight gradient", {64, 56, 56, 8}, {64, 56, 56, 8}, {1, 1},
       {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false, bfloat16, R::weight_grad},
      {"the same, depthwise", {1, 56, 56, 512}, {64, 56, 56, 8}, {1, 1},
       {1, 1}, {1, 1}, {1, 1}, {1, 1}, 64, false, bfloat16, R::weight_grad},
      {"the same, flipped", {64, 56, 56, 8}, {64, 56, 56, 8}, {1, 1},
       {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, true, bfloat16, R::forward},
      {"a long kernel and a long output", {2, 100, 8}, {8, 31, 8}, {1}, {15},
       {15}, {1}, {1}, 1, false, float16, R::forward},
      {"a long kernel on its data gradient", {2, 100, 8}, {8, 31, 8}, {1},
       {15}, {15}, {1}, {2}, 1, false, float16, R::none},
      // The weight gradient of a 31-tap conv over 100 steps: the cotangent
      // a 100-tap kernel, 31 outputs; cuDNN's forward engines crawl there.
      {"a kernel longer than its long output", {8, 130, 8}, {8, 100, 8},
       {1}, {0}, {0}, {1}, {1}, 1, false, bfloat16, R::none},
  };
  for (const auto& c : cases) {
    Convolution p(default_stream(Device::cpu), c.stride, c.lo, c.hi, c.kd,
                  c.id, c.groups, c.flip);
    Shape out = conv_output_shape(c.x, c.w, c.stride, c.lo, c.hi, c.kd, c.id);
    EXPECT_EQ(cuda::cudnn_conv_route(p, array::uninitialized(c.x, c.dt),
                                     array::uninitialized(c.w, c.dt),
                                     array::uninitialized(out, c.dt)),
              c.route)
        << c.name;
  }
}
#endif // KILN_HAS_CUDA

TEST_F(GpuConv, BadArgumentsRaise) {
  array x = rnd({2, 10, 4}, float32), w = rnd({6, 3, 4}, float32);
  EXPECT_THROW(conv1d(x, rnd({6, 3, 3}, float32), 1, 0, 1, 1, Device::gpu),
               std::invalid_argument);
  EXPECT_THROW(conv1d(x, rnd({5, 3, 2}, float32), 1, 0, 1, 2, Device::gpu),
               std::invalid_argument);
  EXPECT_THROW(conv1d(x, rnd({6, 11, 4}, float32), 1, 0, 1, 1, Device::gpu),
               std::invalid_argument);
  EXPECT_THROW(
      conv1d(astype(x, int32), astype(w, int32), 1, 0, 1, 1, Device::gpu),
      std::invalid_argument);
  EXPECT_THROW(conv2d(x, w, {1, 1}, {0, 0}, {1, 1}, 1, Device::gpu),
               std::invalid_argument);
}

} // namespace
} // namespace kiln::test
