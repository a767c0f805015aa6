// The microscaling modes (mxfp4, mxfp8, nvfp4) on the GPU: the matvec
// that reads the codes against float64 products of the exactly
// dequantized weight (every mode and float dtype, 1 to 8 rows of x on
// the kernel and 9 and 17 on dequantize-then-GEMM, inner dimensions for each
// group of threads, output rows not a multiple of a block, strided x),
// nvfp4 inner dimensions of odd 16-code groups (the graph), NaN codes and
// scales at both ends of e8m0's range, gather_qmm's picks read in place,
// the gradient, and dequantize bit for bit against the CPU on every code
// and scale byte.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/gpu_fixture.h"
#include "kiln/ops/quantized.h"
#include "kiln/transforms/autograd.h"

namespace kiln::test {
namespace {

using GpuQuantizedFp = GpuTest;

struct Mode {
  const char* name;
  int group, bits;
};
const Mode modes[] = {{"mxfp4", 32, 4}, {"mxfp8", 32, 8}, {"nvfp4", 16, 4}};

// A weight of rows at scales 0.05 to 20 (e8m0 and e4m3 scales of many
// sizes), quantized on the CPU.
std::pair<array, array> quantized_weight(const Mode& md, int n, int k) {
  array w = multiply(random_array({n, k}, float32, -1, 1),
                     random_array({n, 1}, float32, 0.05, 20));
  return quantize_fp(w, md.group, md.bits, md.name, std::nullopt,
                     Device::cpu);
}

// x @ wd.T in float64 on the CPU, wd the exactly dequantized weight.
array reference(const array& x, const array& q, const array& s,
                const Mode& md) {
  array wd = dequantize_fp(q, s, md.group, md.bits, md.name, float64,
                           std::nullopt, Device::cpu);
  return matmul(astype(x, float64, Device::cpu), swapaxes(wd, -1, -2),
                Device::cpu);
}

// float32 sums in another order, and 16-bit outputs rounded once: the
// absolute error follows the largest product, and grows as the square
// root of k past 256.
::testing::AssertionResult close_to(const array& got, const array& ref,
                                    Dtype dt, int64_t k) {
  if (got.dtype() != dt || got.shape() != ref.shape()) {
    return ::testing::AssertionFailure() << "got " << got << " for " << ref;
  }
  auto want = to_doubles(ref);
  double largest = 0;
  for (double v : want) largest = std::max(largest, std::abs(v));
  double t = (dt == float32 ? 1e-5 : 2 * tolerance(dt)) *
             (k <= 256 ? 1.0 : std::sqrt(k / 256.0));
  return all_close(to_doubles(got), want, t, t * largest);
}

bool reads_the_codes(const array& a) {
  return a.has_primitive() &&
         std::string(a.primitive().name()) == "QuantizedMatmulFp";
}

TEST_F(GpuQuantizedFp, MatvecEveryModeDtypeAndRowCount) {
  // k = 128: groups of 32 threads; 2080 (65 blocks): 64; 4128 (129
  // blocks): 128, a thread taking two blocks. 37 output rows: the last
  // block partly past them. x strided (every other column).
  for (const Mode& md : modes) {
    for (int k : {128, 2080, 4128}) {
      auto [q, s] = quantized_weight(md, 37, k);
      for (Dtype dt : {float32, float16, bfloat16}) {
        for (int rows : {1, 2, 3, 5, 8, 9, 17}) {
          array x = slice(random_array({rows, 2 * k}, dt, -1, 1),
                          Shape{0, 0}, Shape{rows, 2 * k}, Shape{1, 2});
          array got = quantized_matmul_fp(x, q, s, true, md.group, md.bits,
                                          md.name, Device::gpu);
          EXPECT_EQ(reads_the_codes(got), rows <= 8) << rows;
          EXPECT_TRUE(close_to(got, reference(x, q, s, md), dt, k))
              << md.name << " " << dtype_name(dt) << " k=" << k
              << " rows=" << rows;
        }
      }
    }
  }
}

TEST_F(GpuQuantizedFp, LeadingAxesOfX) {
  for (const Mode& md : modes) {
    auto [q, s] = quantized_weight(md, 20, 256);
    array x = random_array({2, 3, 256}, bfloat16, -1, 1);
    array got = quantized_matmul_fp(x, q, s, true, md.group, md.bits,
                                    md.name, Device::gpu);
    EXPECT_TRUE(reads_the_codes(got));
    EXPECT_TRUE(close_to(got, reference(x, q, s, md), bfloat16, 256))
        << md.name;
  }
}

TEST_F(GpuQuantizedFp, NvInnerDimensionOfOddGroupsTakesTheGraph) {
  // k = 48: three 16-code groups, not whole 32-code blocks.
  const Mode nv = modes[2];
  auto [q, s] = quantized_weight(nv, 9, 48);
  array x = random_array({2, 48}, float32, -1, 1);
  array got = quantized_matmul_fp(x, q, s, true, 16, 4, "nvfp4",
                                  Device::gpu);
  EXPECT_FALSE(reads_the_codes(got));
  EXPECT_TRUE(close_to(got, reference(x, q, s, nv), float32, 48));
}

// Words of codes and scale bytes set by hand: mxfp4 codes of value 1
// (0x2) under e8m0's largest finite scale, 2^127 (code 254; the kernel's
// 2^14 applied first would overflow), and its smallest, 2^-127 (code 0, a
// subnormal), times x that brings the products back to moderate sizes;
// and an mxfp8 weight with one NaN code (0x7f) in its second row.
TEST_F(GpuQuantizedFp, ExtremeScalesAndNanCodes) {
  const int k = 64;
  for (auto [code, x_exponent] : {std::pair{254, -110}, std::pair{0, 100}}) {
    std::vector<uint32_t> words(k / 8, 0x22222222u);
    std::vector<uint8_t> scales(k / 32, static_cast<uint8_t>(code));
    array q(words, {1, k / 8}, uint32), s(scales, {1, k / 32}, uint8);
    std::vector<float> xv(k);
    for (int i = 0; i < k; ++i) {
      xv[i] = std::ldexp(1.0f + i % 3, x_exponent);
    }
    array x(xv, {1, k}, float32);
    array got = quantized_matmul_fp(x, q, s, true, 32, 4, "mxfp4",
                                    Device::gpu);
    ASSERT_TRUE(reads_the_codes(got));
    EXPECT_TRUE(std::isfinite(to_doubles(got)[0])) << code;
    EXPECT_TRUE(close_to(got, reference(x, q, s, modes[0]), float32, k))
        << code;
  }

  std::vector<uint32_t> w8(2 * k / 4, 0x38383838u); // e4m3 1.0
  w8[k / 4 + 3] = 0x387f3838u;                      // row 1: a NaN code
  array q8(w8, {2, k / 4}, uint32);
  array s8(std::vector<uint8_t>{127, 127, 127, 127}, {2, 2}, uint8);
  array y = quantized_matmul_fp(random_array({3, k}, float32, -1, 1), q8, s8,
                                true, 32, 8, "mxfp8", Device::gpu);
  ASSERT_TRUE(reads_the_codes(y));
  auto yv = to_doubles(y);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::isfinite(yv[r * 2])) << r;
    EXPECT_TRUE(std::isnan(yv[r * 2 + 1])) << r;
  }
}

TEST_F(GpuQuantizedFp, GatherQmmReadsPicksInPlace) {
  // -1 is the last matrix, 9 clamps to it, -7 to the first.
  array li = array({0, 3, 1, 2, -1, 0, 2}, {7}, int32);
  array ri = array({4, 0, -1, 9, 2, -7, 1}, {7}, int32);
  for (const Mode& md : modes) {
    array w = random_array({5, 36, 128}, float32, -1, 1);
    auto [q, s] = quantize_fp(w, md.group, md.bits, md.name, std::nullopt,
                              Device::cpu);
    for (Dtype dt : {float32, bfloat16}) {
      // Up to 5 rows a pick: fewer than 8 per matrix, read in place.
      for (int rows : {1, 3, 5}) {
        array x = random_array({4, rows, 128}, dt, -1, 1);
        auto fn = [&](const std::vector<array>& in, Device d) {
          return gather_qmm(in[0], q, s, std::nullopt, li, ri, true,
                            md.group, md.bits, md.name, false, std::nullopt,
                            d);
        };
        EXPECT_TRUE(reads_the_codes(fn({x}, Device::gpu)));
        EXPECT_TRUE(same_on_devices(
            fn, {x}, dt == float32 ? 1e-4 : 4 * tolerance(dt)))
            << md.name << " " << dtype_name(dt) << " rows=" << rows;
      }
    }
  }
}

TEST_F(GpuQuantizedFp, GradientOfXOnTheGpu) {
  for (const Mode& md : modes) {
    auto [q, s] = quantized_weight(md, 20, 128);
    array x = random_array({3, 128}, float32, -1, 1);
    auto loss = [&](Device d) {
      return [=](const std::vector<array>& in) {
        array y = quantized_matmul_fp(in[0], q, s, true, md.group, md.bits,
                                      md.name, d);
        return std::vector<array>{sum(multiply(y, y, d), false, d)};
      };
    };
    auto [gv, gg] = vjp(loss(Device::gpu), {x}, {array(1.0f)});
    auto [cv, cg] = vjp(loss(Device::cpu), {x}, {array(1.0f)});
    EXPECT_TRUE(all_close(to_doubles(gg[0]), to_doubles(cg[0]), 1e-4, 1e-3))
        << md.name;
    EXPECT_TRUE(all_close(to_doubles(gv[0]), to_doubles(cv[0]), 1e-4, 1e-2))
        << md.name;
  }
}

TEST_F(GpuQuantizedFp, DequantizeMatchesTheCpuBitForBit) {
  // Random words and scale bytes: every code, NaN codes and scales,
  // e8m0's 0 (subnormal) and 255 (infinite) included.
  std::mt19937 gen(31);
  for (const Mode& md : modes) {
    const int n = 16, k = 256;
    std::vector<uint32_t> words(3 * n * k * md.bits / 32);
    for (auto& v : words) v = static_cast<uint32_t>(gen());
    std::vector<uint8_t> bytes(3 * n * k / md.group);
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = i < 256 ? static_cast<uint8_t>(i)
                         : static_cast<uint8_t>(gen() & 0xff);
    }
    array q(words, {3, n, k * md.bits / 32}, uint32);
    array s(bytes, {3, n, k / md.group}, uint8);
    std::vector<std::optional<array>> factors = {std::nullopt};
    if (md.group == 16) factors.push_back(array(37.5f));
    for (const auto& g : factors) {
      for (Dtype out : {float32, float16, bfloat16}) {
        array gd = dequantize_fp(q, s, md.group, md.bits, md.name, out, g,
                                 Device::gpu);
        array cd = dequantize_fp(q, s, md.group, md.bits, md.name, out, g,
                                 Device::cpu);
        ASSERT_TRUE(gd.has_primitive());
        EXPECT_STREQ(gd.primitive().name(), "DequantizeFp");
        ASSERT_EQ(gd.dtype(), out);
        EXPECT_TRUE(all_close(to_doubles(gd), to_doubles(cd), 0, 0))
            << md.name << " -> " << dtype_name(out)
            << (g ? " with a global scale" : "");
      }
    }
  }
}

} // namespace
} // namespace kiln::test
