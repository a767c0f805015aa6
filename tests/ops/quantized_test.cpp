// quantize, dequantize and quantized_matmul against loops written here
// (float32 arithmetic as MLX's affine mode, the codes packed bit by bit),
// for every bit width and group size, float32/bfloat16/float16 weights,
// batched and non-contiguous inputs; the matmul's gradient; bad input.
#include <cmath>
#include <stdexcept>

#include "kiln/ops/quantized.h"
#include "kiln/transforms/autograd.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

struct Reference {
  std::vector<uint32_t> words;
  std::vector<float> scales, biases;
};

float round_even(float v) { return std::nearbyint(v); }

// Rows of n values (already rounded to the weight's dtype), group by group.
Reference quantize_loops(const std::vector<double>& w, int rows, int n,
                         int group_size, int bits) {
  Reference r;
  r.words.assign(size_t(rows) * n * bits / 32, 0);
  float levels = float((1 << bits) - 1);
  for (int row = 0; row < rows; ++row) {
    for (int g0 = 0; g0 < n; g0 += group_size) {
      const double* x = &w[size_t(row) * n + g0];
      float hi = float(x[0]), lo = float(x[0]);
      for (int j = 1; j < group_size; ++j) {
        hi = std::max(hi, float(x[j]));
        lo = std::min(lo, float(x[j]));
      }
      float scale = std::max((hi - lo) / levels, 1e-7f), bias = lo;
      if (bits > 1) {
        bool low_end = std::fabs(lo) > std::fabs(hi);
        if (!low_end) scale = -scale;
        float edge = low_end ? lo : hi;
        float q0 = round_even(edge / scale);
        if (q0 != 0) scale = edge / q0;
        bias = q0 == 0 ? 0.0f : edge;
      }
      r.scales.push_back(scale);
      r.biases.push_back(bias);
      for (int j = 0; j < group_size; ++j) {
        float q = round_even((float(x[j]) - bias) / scale);
        uint32_t code = uint32_t(std::min(std::max(q, 0.0f), levels));
        size_t bit = (size_t(row) * n + g0 + j) * bits;
        for (int b = 0; b < bits; ++b, ++bit) {
          r.words[bit / 32] |= ((code >> b) & 1u) << (bit % 32);
        }
      }
    }
  }
  return r;
}

std::vector<double> as_doubles(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

TEST(Quantized, MatchesLoopsForEveryWidthAndGroup) {
  for (Dtype dt : {float32, bfloat16, float16}) {
    for (int bits : {1, 2, 3, 4, 5, 6, 8}) {
      for (int gs : {32, 64, 128}) {
        int rows = 6, n = 256;
        array w = random_array({2, 3, n}, dt, -3, 3);
        auto [q, scales, biases] = quantize(w, gs, bits);
        auto ref = quantize_loops(to_doubles(w), rows, n, gs, bits);
        std::string what = dtype_name(dt) + " bits=" + std::to_string(bits) +
                           " gs=" + std::to_string(gs);
        ASSERT_EQ(q.shape(), (Shape{2, 3, n * bits / 32})) << what;
        ASSERT_EQ(q.dtype(), uint32);
        ASSERT_EQ(scales.shape(), (Shape{2, 3, n / gs})) << what;
        ASSERT_EQ(scales.dtype(), dt);
        auto words = to_doubles(q);
        for (size_t i = 0; i < words.size(); ++i) {
          ASSERT_EQ(uint32_t(words[i]), ref.words[i]) << what << " word " << i;
        }
        // Scales and biases: the float32 values rounded once to dt.
        auto rs = to_doubles(astype(array(ref.scales, {rows, n / gs}, float32), dt));
        auto rb = to_doubles(astype(array(ref.biases, {rows, n / gs}, float32), dt));
        EXPECT_TRUE(all_close(to_doubles(scales), rs, 0, 0)) << what;
        EXPECT_TRUE(all_close(to_doubles(biases), rb, 0, 0)) << what;
        // Dequantized: code * scale + bias in dt, each step rounded.
        auto dq = to_doubles(dequantize(q, scales, biases, gs, bits));
        auto sv = to_doubles(scales), bv = to_doubles(biases);
        std::vector<double> expect(dq.size());
        for (size_t i = 0; i < dq.size(); ++i) {
          uint32_t code = 0;
          for (int b = 0; b < bits; ++b) {
            size_t bit = i * bits + b;
            code |= ((ref.words[bit / 32] >> (bit % 32)) & 1u) << b;
          }
          size_t g = i / gs;
          double prod = quantize({double(code) * sv[g]}, dt)[0];
          expect[i] = quantize({prod + bv[g]}, dt)[0];
        }
        EXPECT_TRUE(all_close(dq, expect, 0, 0)) << what;
        // The round trip is within a step of each group (half a step of
        // rounding, or, at the end opposite the exactly represented one,
        // what the adjusted scale no longer reaches: under a step), plus
        // the roundings to dt of code * scale and of the sum.
        auto wv = to_doubles(w);
        double eps = dt == float32 ? 0x1p-24 : dt == float16 ? 0x1p-11 : 0x1p-8;
        double levels = double((1 << bits) - 1);
        for (size_t i = 0; i < wv.size(); ++i) {
          double step = std::fabs(sv[i / gs]);
          double rounding =
              eps * (levels * step + std::fabs(bv[i / gs]) + std::fabs(wv[i]));
          ASSERT_LE(std::fabs(dq[i] - wv[i]), step + rounding + 1e-6)
              << what << " element " << i;
        }
      }
    }
  }
}

TEST(Quantized, NonContiguousInputsQuantizeAsTheirValues) {
  array base = random_array({128, 96}, float32, -1, 1);
  for (const array& w : {transpose(base), slice(base, Shape{0, 0}, Shape{128, 96},
                                                Shape{2, 1})}) {
    auto [q, s, b] = quantize(w, 32, 4);
    auto [q2, s2, b2] = quantize(contiguous(w), 32, 4);
    EXPECT_TRUE(all_close(to_doubles(q), to_doubles(q2), 0, 0));
    EXPECT_TRUE(all_close(to_doubles(s), to_doubles(s2), 0, 0));
    // A broadcast bias row in dequantize.
    EXPECT_TRUE(all_close(to_doubles(dequantize(q, s, b, 32, 4)),
                          to_doubles(dequantize(q2, s2, b2, 32, 4)), 0, 0));
  }
}

TEST(Quantized, MatmulAndItsGradient) {
  array w = random_array({64, 128}, float32, -1, 1);
  array x = random_array({2, 5, 128}, float32, -1, 1);
  for (int bits : {3, 4, 8}) {
    auto [q, s, b] = quantize(w, 64, bits);
    array wd = dequantize(q, s, b, 64, bits);
    array ref = matmul(x, transpose(wd));
    EXPECT_TRUE(all_close(to_doubles(quantized_matmul(x, q, s, b, true, 64, bits)),
                          to_doubles(ref), 1e-5, 1e-5));
    // transpose = false: w quantized as (in, out).
    auto [qt, st, bt] = quantize(transpose(w), 32, bits);
    array xt = random_array({3, 128}, float32, -1, 1);
    EXPECT_TRUE(all_close(
        to_doubles(quantized_matmul(xt, qt, st, bt, false, 32, bits)),
        to_doubles(matmul(xt, dequantize(qt, st, bt, 32, bits))), 1e-5, 1e-5));
    // d/dx of sum(x @ W^T) is the column sums of W, through the quantized
    // weight.
    auto f = [&](const std::vector<array>& in) {
      return std::vector<array>{sum(quantized_matmul(in[0], q, s, b, true, 64, bits))};
    };
    auto [out, grads] = vjp(f, {x}, {array(1.0f)});
    array expect = broadcast_to(sum(wd, 0), x.shape());
    EXPECT_TRUE(all_close(to_doubles(grads[0]), to_doubles(expect), 1e-5, 1e-5));
  }
}

// The CPU's kernel (QuantizedMatmul: per group for few rows of x, one GEMM
// for many) against matmul with the exact dequantized weight, for every
// width and the three float types. On the CPU wherever the suite's default
// device is: elsewhere quantized_matmul is the op graph, whose dequantize
// rounds each step in the weight's float type, as MLX's does.
TEST(Quantized, CpuKernelMatchesTheGraph) {
  DefaultDeviceScope cpu(Device::cpu);
  for (Dtype dt : {float32, bfloat16, float16}) {
    for (int bits : {1, 2, 3, 4, 5, 6, 8}) {
      array w = random_array({40, 256}, dt, -1, 1);
      auto [q, s, b] = quantize(w, 64, bits);
      // The exact weight scale * code + bias (scales and biases in
      // float32, nothing rounded to dt): what the kernel multiplies by.
      array wd = dequantize(q, astype(s, float32), astype(b, float32), 64,
                            bits);
      for (int rows : {1, 3, 16}) {
        array x = random_array({rows, 256}, dt, -1, 1);
        array got = quantized_matmul(x, q, s, b, true, 64, bits);
        ASSERT_EQ(got.dtype(), dt);
        array ref = matmul(astype(x, float32), transpose(wd));
        // float32 sums in another order; 16-bit outputs round once.
        double tol = dt == float32 ? 1e-5 : 2 * tolerance(dt);
        EXPECT_TRUE(all_close(to_doubles(got), to_doubles(ref), tol, tol))
            << dtype_name(dt) << " bits=" << bits << " rows=" << rows;
      }
    }
  }
}

TEST(Quantized, EmptyInnerDimensionGivesZeros) {
  // x (3, 0) @ w(5, 0).T: sums over nothing, for one matrix and a batch.
  for (Dtype dt : {float32, float16}) {
    array x = zeros({3, 0}, dt);
    array w = zeros({5, 0}, uint32), s = ones({5, 0}, dt), b = ones({5, 0}, dt);
    array y = quantized_matmul(x, w, s, b);
    ASSERT_EQ(y.shape(), (Shape{3, 5}));
    EXPECT_TRUE(all_close(to_doubles(y), std::vector<double>(15, 0.0), 0, 0))
        << dtype_name(dt);
    array yb = quantized_matmul(zeros({2, 3, 0}, dt), zeros({2, 5, 0}, uint32),
                                ones({2, 5, 0}, dt), ones({2, 5, 0}, dt));
    EXPECT_TRUE(all_close(to_doubles(yb), std::vector<double>(30, 0.0), 0, 0))
        << dtype_name(dt) << " batch";
  }
}

TEST(Quantized, BadInputRaises) {
  array w = random_array({4, 128}, float32);
  expect_invalid([&] { quantize(w, 16, 4); }, "quantize", "group_size 16");
  expect_invalid([&] { quantize(w, 64, 7); }, "quantize", "bits 7");
  expect_invalid([&] { quantize(w, 64, 4, "mxfp4"); }, "quantize", "'mxfp4'");
  expect_invalid([&] { quantize_fp(w, 64, 4, "mxfp4"); }, "quantize",
                 "needs group_size 32");
  expect_invalid([&] { quantize_fp(w, 16, 4, "int4"); }, "quantize",
                 "'int4'");
  expect_invalid([&] { dequantize_fp(w, w, 32, 4, "mxfp4"); }, "dequantize",
                 "uint32 codes");
  expect_invalid([&] { quantize(random_array({128}, float32)); }, "quantize",
                 "at least 2 dimensions");
  expect_invalid([&] { quantize(random_array({4, 96}, float32)); }, "quantize",
                 "multiple of the group size 64");
  expect_invalid([&] { quantize(random_array({4, 128}, int32, 0, 9)); },
                 "quantize", "only floating");
  auto [q, s, b] = quantize(w);
  expect_invalid([&] { dequantize(astype(q, int32), s, b); }, "dequantize",
                 "uint32");
  expect_invalid([&] { dequantize(q, s, b, 32); }, "dequantize",
                 "scales and biases should be (4, 4)");
  expect_invalid([&] { dequantize(q, s, astype(b, float16)); }, "dequantize",
                 "share one floating dtype");
  expect_invalid([&] { quantized_matmul(random_array({3, 100}, float32), q, s, b); },
                 "quantized_matmul", "does not match");
}

} // namespace
} // namespace kiln::test

namespace kiln::test {
namespace {

// e4m3's value of a code, written out here: exponent field 0 is
// subnormal (q * 2^-9), 0x7f / 0xff NaN.
double e4m3_value(int c) {
  int e = (c >> 3) & 15, q = c & 7;
  double v = e == 0 ? q * std::ldexp(1.0, -9) : std::ldexp(1 + q / 8.0, e - 7);
  if ((c & 0x7f) == 0x7f) v = std::nan("");
  return c & 0x80 ? -v : v;
}

TEST(Fp8, EveryCodeDecodesAndRoundTrips) {
  std::vector<uint8_t> all(256);
  for (int c = 0; c < 256; ++c) all[c] = static_cast<uint8_t>(c);
  array codes(all, Shape{256}, uint8);
  for (Dtype dt : {float32, float16, bfloat16}) {
    auto v = to_doubles(from_fp8(codes, dt));
    std::vector<double> finite;
    for (int c = 0; c < 256; ++c) {
      double want = e4m3_value(c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(v[c])) << c;
        continue;
      }
      EXPECT_EQ(v[c], want) << c << " " << dtype_name(dt);
    }
    // Every finite value encodes back to its code (+-0 to 0x00 / 0x80).
    auto back = to_doubles(to_fp8(from_fp8(codes, dt)));
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7f) != 0x7f) EXPECT_EQ(back[c], c) << dtype_name(dt);
    }
  }
}

TEST(Fp8, RoundsToNearestEvenAndSaturates) {
  // Midpoints between neighbouring codes go to the even code; a little
  // past them, to the nearer one.
  std::vector<float> x, want;
  for (int c = 0; c < 126; ++c) {
    double lo = e4m3_value(c), hi = e4m3_value(c + 1);
    double mid = (lo + hi) / 2;
    x.push_back(static_cast<float>(mid));
    want.push_back(c % 2 == 0 ? c : c + 1);
    x.push_back(static_cast<float>(mid + (hi - lo) / 8));
    want.push_back(c + 1);
    x.push_back(static_cast<float>(-(mid - (hi - lo) / 8)));
    want.push_back(128 + c);
  }
  // Beyond 448 (the largest value), infinities and NaN saturate with their
  // sign.
  float inf = std::numeric_limits<float>::infinity();
  for (float v : {464.0f, 1e6f, inf}) {
    x.push_back(v);
    want.push_back(126);
    x.push_back(-v);
    want.push_back(254);
  }
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  want.push_back(126);
  auto got = to_doubles(to_fp8(array(x, Shape{int(x.size())}, float32)));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "x = " << x[i];
  }
  // Non-contiguous and 16-bit inputs.
  array y = random_array({6, 5}, bfloat16, -300, 300);
  EXPECT_EQ(to_doubles(to_fp8(transpose(y))),
            to_doubles(to_fp8(contiguous(transpose(y)))));
  EXPECT_EQ(to_doubles(to_fp8(y)), to_doubles(to_fp8(astype(y, float32))));
}

TEST(Fp8, BadInput) {
  expect_invalid([] { to_fp8(array({1, 2})); }, "to_fp8", "int32");
  expect_invalid([] { from_fp8(array({1.0f})); }, "from_fp8", "float32");
  expect_invalid([] { from_fp8(array({uint8_t(1)}), int32); }, "from_fp8",
                 "int32");
}

} // namespace
} // namespace kiln::test

namespace kiln::test {
namespace {

// The microscaling modes against loops written here (one group at a time,
// in double): scales, codes, dequantized values and the product.
TEST(QuantizedModes, MxAndNvAgainstAReference) {
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  struct Mode {
    const char* name;
    int group, bits;
  };
  for (Mode md : {Mode{"mxfp4", 32, 4}, Mode{"mxfp8", 32, 8},
                  Mode{"nvfp4", 16, 4}}) {
    array w = multiply(random_array({8, 128}, float32, -1, 1),
                       random_array({8, 1}, float32, 0.01, 50));
    auto [q, sc] = quantize_fp(w, md.group, md.bits, md.name);
    auto wv = to_doubles(w);
    auto sv = to_doubles(sc);
    auto dq = to_doubles(dequantize_fp(q, sc, md.group, md.bits, md.name,
                                       float32));
    int groups = 128 / md.group;
    for (int r = 0; r < 8; ++r) {
      for (int g = 0; g < groups; ++g) {
        double amax = 0;
        for (int j = 0; j < md.group; ++j) {
          amax = std::max(amax, std::abs(wv[r * 128 + g * md.group + j]));
        }
        double scale;
        if (md.bits == 4 && std::string(md.name) == "nvfp4") {
          scale = to_doubles(from_fp8(to_fp8(array(float(amax / 6))),
                                      float32))[0];
        } else {
          int e = static_cast<int>(
              std::ceil(std::log2(amax / (md.bits == 4 ? 6.0 : 448.0))));
          EXPECT_EQ(sv[r * groups + g], e + 127) << md.name;
          scale = std::ldexp(1.0, e);
        }
        for (int j = 0; j < md.group; ++j) {
          int i = r * 128 + g * md.group + j;
          double v = wv[i] / scale, want;
          if (md.bits == 4) {
            // Nearest e2m1 value, ties toward zero.
            int k = 0;
            for (int c = 0; c < 7; ++c) {
              k += std::abs(v) > (e2m1[c] + e2m1[c + 1]) / 2;
            }
            want = (v < 0 ? -1 : 1) * e2m1[k] * scale;
          } else {
            want = to_doubles(from_fp8(to_fp8(array(float(v))), float32))[0] *
                   scale;
          }
          EXPECT_EQ(dq[i], want) << md.name << " " << i << " v=" << v;
        }
      }
    }
    // The product against matmul with the dequantized weight; transposed
    // x.
    array x = transpose(random_array({128, 3}, float32, -1, 1));
    array ref = matmul(x, transpose(dequantize_fp(q, sc, md.group, md.bits,
                                                  md.name, float32)));
    EXPECT_TRUE(all_close(to_doubles(quantized_matmul_fp(x, q, sc, true,
                                                         md.group, md.bits,
                                                         md.name)),
                          to_doubles(ref), 1e-5, 1e-4))
        << md.name;
  }
}

// nvfp4's global scale g against loops written here: the e4m3 scale of
// max / 6 / (g / 2688), codes against scale * (g / 2688), and the values
// code * (scale * (g / 2688)); g from 1e-3 (scales saturate at 448) to a
// weight's max. One g per matrix for gather_qmm's experts.
TEST(QuantizedModes, NvGlobalScaleAgainstAReference) {
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  array w = multiply(random_array({6, 64}, float32, -1, 1),
                     random_array({6, 1}, float32, 0.01, 50));
  auto wv = to_doubles(w);
  double wmax = 0;
  for (double v : wv) wmax = std::max(wmax, std::abs(v));
  for (float gv : {float(wmax), 3.7f, 1e-3f}) {
    array g(gv);
    auto [q, sc] = quantize_fp(w, 16, 4, "nvfp4", g);
    auto dq = to_doubles(dequantize_fp(q, sc, 16, 4, "nvfp4", float32, g));
    const float factor = gv / 2688.0f;
    for (int grp = 0; grp < 6 * 4; ++grp) {
      float amax = 0;
      for (int j = 0; j < 16; ++j) {
        amax = std::max(amax, float(std::abs(wv[grp * 16 + j])));
      }
      float stored = static_cast<float>(
          to_doubles(from_fp8(to_fp8(array(amax / 6.0f / factor)),
                              float32))[0]);
      const float scale = stored * factor;
      for (int j = 0; j < 16; ++j) {
        const int i = grp * 16 + j;
        float v = scale == 0 ? 0.0f : float(wv[i]) / scale;
        int k = 0;
        for (int c = 0; c < 7; ++c) {
          k += std::abs(v) > (e2m1[c] + e2m1[c + 1]) / 2;
        }
        float want = (v < 0 ? -1.0f : 1.0f) * e2m1[k] * scale;
        EXPECT_EQ(dq[i], want) << "g=" << gv << " " << i << " v=" << v;
      }
    }
  }
  // Per expert: gather_qmm dequantizes each picked matrix with its own g.
  array w3 = reshape(w, {3, 2, 64});
  auto [q3, s3] = quantize_fp(w3, 16, 4, "nvfp4");
  array gs = array({2.0f, 0.5f, 40.0f}, {3});
  array x = random_array({2, 1, 64}, float32, -1, 1);
  array ri = array({2u, 0u}, {2});
  array got = gather_qmm(x, q3, s3, std::nullopt, std::nullopt, ri, true, 16,
                         4, "nvfp4", false, gs);
  for (int p = 0; p < 2; ++p) {
    int e = p == 0 ? 2 : 0;
    array wd = dequantize_fp(take(q3, array(e), 0), take(s3, array(e), 0), 16,
                             4, "nvfp4", float32, take(gs, array(e), 0));
    array want = matmul(take(x, array(p), 0), transpose(wd));
    EXPECT_TRUE(all_close(to_doubles(take(got, array(p), 0)),
                          to_doubles(want), 1e-6, 1e-6));
  }
  // Misuse: another mode, float16, a vector for quantize, none per expert
  // or no indices for gather_qmm.
  expect_invalid([&] { quantize_fp(w, 32, 4, "mxfp4", array(1.0f)); },
                 "quantize", "nvfp4");
  expect_invalid(
      [&] { quantize_fp(w, 16, 4, "nvfp4", astype(array(1.0f), float16)); },
      "quantize", "float32");
  expect_invalid([&] { quantize_fp(w, 16, 4, "nvfp4", gs); }, "quantize",
                 "scalar");
  expect_invalid(
      [&] {
        gather_qmm(x, q3, s3, std::nullopt, std::nullopt, ri, true, 16, 4,
                   "nvfp4", false, array(1.0f));
      },
      "gather_qmm", "one per matrix");
  expect_invalid(
      [&] {
        gather_qmm(x, q3, s3, std::nullopt, std::nullopt, std::nullopt, true,
                   16, 4, "nvfp4", false, gs);
      },
      "gather_qmm", "without indices");
}

} // namespace
} // namespace kiln::test
