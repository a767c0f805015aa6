// GPU random bits, arange and MLX's float32 erf/erfinv against the CPU
// backend: the same Threefry bits bit for bit for every width, shape and
// batch of keys; arange values exactly, 16-bit floats included; samplers
// built on them.
#include "cuda/gpu_fixture.h"
#include "kiln/primitives/random.h"

namespace kiln::test {
namespace {

using GpuRandom = GpuTest;

using Fn = std::function<array(const std::vector<array>&, Device)>;

TEST_F(GpuRandom, BitsBitExactForEveryWidthAndShape) {
  for (uint64_t seed : {0ull, 7ull, 123456789ull, 0xfedcba9876543210ull}) {
    array k = random::key(seed);
    for (int width : {1, 2, 4}) {
      for (const Shape& shape :
           {Shape{}, Shape{1}, Shape{2}, Shape{3}, Shape{5}, Shape{7, 5},
            Shape{2, 3, 5}, Shape{1000}, Shape{70001}, Shape{0, 4}}) {
        Fn fn = [&](const std::vector<array>& v, Device d) {
          return random::bits(shape, width, v[0], d);
        };
        EXPECT_TRUE(same_on_devices(fn, {k}, 0))
            << "seed " << seed << " width " << width << " shape "
            << shape.size();
      }
    }
  }
}

TEST_F(GpuRandom, BitsFromABatchOfKeys) {
  // As vmap over keys builds it: each key fills an equal consecutive share,
  // which need not be a whole number of words.
  array keys = random::split(random::key(42), 5);
  for (int width : {1, 2, 4}) {
    for (const Shape& shape : {Shape{5, 3}, Shape{5, 7, 2}, Shape{5, 1}}) {
      Dtype dt = width == 4 ? uint32 : width == 2 ? uint16 : uint8;
      Fn fn = [&](const std::vector<array>& v, Device d) {
        return array(shape, dt,
                     std::make_shared<RandomBits>(to_stream(d), shape, width),
                     {v[0]});
      };
      EXPECT_TRUE(same_on_devices(fn, {keys}, 0)) << "width " << width;
      // Keys in a transposed layout are read as the CPU reads them.
      EXPECT_TRUE(same_on_devices(fn, {as_transposed(keys)}, 0))
          << "width " << width;
    }
  }
}

TEST_F(GpuRandom, SamplersMatchTheCpu) {
  array k = random::key(3);
  for (Dtype dt : float_dtypes()) {
    Fn uniform = [&](const std::vector<array>& v, Device d) {
      return random::uniform(Shape{33, 17}, dt, v[0], d);
    };
    EXPECT_TRUE(same_on_devices(uniform, {k}, tolerance(dt)))
        << dtype_name(dt);
    // normal draws through Float32Erf's erfinv.
    Fn normal = [&](const std::vector<array>& v, Device d) {
      return random::normal(Shape{33, 17}, dt, std::nullopt, std::nullopt,
                            v[0], d);
    };
    // Float32Erf's log may differ from the host's logf in the last bit.
    double tol = dt == float64 ? 1e-6 : tolerance(dt);
    EXPECT_TRUE(same_on_devices(normal, {k}, tol)) << dtype_name(dt);
  }
}

TEST_F(GpuRandom, ArangeEveryDtypeExactly) {
  struct Case {
    double start, stop, step;
  };
  std::vector<Case> cases = {{0, 10, 1},       {-3.5, 7.25, 0.5},
                             {5, -5, -0.3},    {0.1, 1000.1, 0.7},
                             {0, 70001, 1},    {1e3, 1e3 + 2e-3, 1e-4},
                             {3, 3, 1},        {2, 3, 5}};
  for (Dtype dt : all_dtypes()) {
    for (auto& c : cases) {
      // Values outside an integer type's range do not convert (undefined
      // on the host); bool is refused by the op.
      if (dt == bool_) continue;
      if (is_unsigned(dt) && (c.start < 0 || c.stop < 0)) continue;
      double top = std::max(std::abs(c.start), std::abs(c.stop));
      if ((dt == int8 && top > 127) || (dt == uint8 && top > 255) ||
          (dt == int16 && top > 32767) || (dt == uint16 && top > 65535)) {
        continue;
      }
      Fn fn = [&](const std::vector<array>&, Device d) {
        return arange(c.start, c.stop, c.step, dt, d);
      };
      EXPECT_TRUE(same_on_devices(fn, {}, 0))
          << dtype_name(dt) << " " << c.start << ":" << c.stop << ":"
          << c.step;
    }
  }
}

} // namespace
} // namespace kiln::test
