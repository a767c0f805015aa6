// GPU split against the CPU backend: the pieces are views (eval_gpu shares
// eval_cpu's), so values, strides and data_size must match for every dtype
// family, layout and axis; the gradient is one Concatenate, run by the GPU
// copy kernels over strided cotangents and broadcast zeros.
#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuSplit = GpuTest;

// Every piece of a split of inputs[0] on the GPU equals the CPU's.
::testing::AssertionResult pieces_match(
    const std::function<std::vector<array>(const array&, Device)>& cut,
    const array& a, double tol) {
  size_t n = cut(a, Device::cpu).size();
  for (size_t k = 0; k < n; ++k) {
    DeviceFn fn = [&cut, k](const std::vector<array>& v, Device d) {
      return cut(v[0], d)[k];
    };
    auto r = same_on_devices(fn, {a}, tol);
    if (!r) return r << " (piece " << k << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(GpuSplit, EveryDtypeLayoutAndAxis) {
  for (Dtype dt : all_dtypes()) {
    array a = random_array({20, 30}, dt, -20, 20);
    for (auto& [layout, x] : layouts(a)) {
      for (int axis : {0, 1, -1}) {
        auto by_count = [axis](const array& v, Device d) {
          return split(v, 2, axis, d);
        };
        // Uneven, empty (3:3) and past-the-end pieces.
        auto at = [axis](const array& v, Device d) {
          return split(v, Shape{3, 3, 7, 40}, axis, d);
        };
        EXPECT_TRUE(pieces_match(by_count, x, 0))
            << dtype_name(dt) << " " << layout << " axis " << axis;
        EXPECT_TRUE(pieces_match(at, x, 0))
            << dtype_name(dt) << " " << layout << " axis " << axis;
      }
    }
  }
}

TEST_F(GpuSplit, EdgeSizes) {
  auto at = [](Shape idx, int axis) {
    return [idx, axis](const array& v, Device d) {
      return split(v, idx, axis, d);
    };
  };
  // Empty input, one element, more than 2^16 rows cut on either axis.
  EXPECT_TRUE(pieces_match(at({0, 2}, 1), random_array({0, 4}, float32), 0));
  EXPECT_TRUE(pieces_match(at({0}, 0), random_array({1}, int16, -9, 9), 0));
  array rows = random_array({70001, 3}, bfloat16);
  EXPECT_TRUE(pieces_match(at({1, 65537}, 0), rows, 0));
  EXPECT_TRUE(pieces_match(at({1}, 1), as_transposed(rows), 0));
}

TEST_F(GpuSplit, PiecesShareTheDeviceBuffer) {
  array x = exp(random_array({8, 12}, float32), Device::gpu);
  eval(x);
  ASSERT_TRUE(x.on_device());
  auto pieces = split(x, 3, 1, Device::gpu);
  eval(pieces);
  for (auto& p : pieces) {
    EXPECT_EQ(p.buffer().ptr, x.buffer().ptr);
    EXPECT_TRUE(p.on_device());
    EXPECT_EQ(p.strides(), x.strides());
  }
}

TEST_F(GpuSplit, GradientIsOneConcatenate) {
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    array a = random_array({12, 9}, dt);
    for (auto& [layout, x] : layouts(a)) {
      for (int axis : {0, 1}) {
        // Pieces 0 and 2 used (piece 0 twice), piece 1 not: its zeros are a
        // broadcast the Concatenate reads with stride 0.
        DeviceFn fn = [axis](const std::vector<array>& v, Device d) {
          return grad(std::function<array(const array&)>([axis, d](const array& y) -> array {
            auto p = split(y, 3, axis, d);
            return add(sum(multiply(p[0], p[0], d), false, d),
                       sum(multiply(p[2], array(3.0f), d), false, d), d);
          }))(v[0]);
        };
        EXPECT_TRUE(same_on_devices(fn, {x}, tolerance(dt)))
            << dtype_name(dt) << " " << layout << " axis " << axis;
      }
    }
  }
  // A cotangent per piece, > 2^16 rows.
  DeviceFn rows = [](const std::vector<array>& v, Device d) {
    return grad(std::function<array(const array&)>([d](const array& y) -> array {
      auto p = split(y, Shape{5, 70000}, 0, d);
      return add(sum(square(p[0], d), false, d),
                 add(sum(p[1], false, d), sum(exp(p[2], d), false, d), d), d);
    }))(v[0]);
  };
  EXPECT_TRUE(same_on_devices(rows, {random_array({70003, 2}, float32)},
                              tolerance(float32)));
}

} // namespace
} // namespace kiln::test
