// gather_qmm against float64 products of the exactly dequantized picked
// matrices: picks read in place (few rows per pick), the dequantize-then-
// gather_mm route (many), broadcast and absent indices, negative and
// out-of-range picks, every float dtype, the microscaling modes' picks,
// the gradient through the primitive's fallback, and bad input.
#include <algorithm>
#include <cmath>

#include "kiln/ops/quantized.h"
#include "kiln/transforms/autograd.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

// The row of a batch of n that index i picks: negative from the end, then
// clamped (kiln's gathers).
int64_t pick(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return std::min<int64_t>(std::max<int64_t>(i, 0), n - 1);
}

// For each pick p (over the broadcast of li and ri, given flat here):
// x[li[p]] @ wd[ri[p]].T in float64, wd the float64 weights (E, N, K).
std::vector<double> picked_products(const array& x, const array& wd,
                                    const std::vector<int>& li,
                                    const std::vector<int>& ri) {
  int64_t E = wd.shape(0), N = wd.shape(1), K = wd.shape(2);
  int64_t X = x.shape(0), M = x.shape(1);
  auto xv = to_doubles(x), wv = to_doubles(wd);
  std::vector<double> out;
  for (size_t p = 0; p < ri.size(); ++p) {
    int64_t a = pick(li[p], X), e = pick(ri[p], E);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += xv[(a * M + m) * K + k] * wv[(e * N + n) * K + k];
        }
        out.push_back(acc);
      }
    }
  }
  return out;
}

// picked_products with wd = scale * code + bias exactly.
std::vector<double> reference(const array& x, const array& q, const array& s,
                              const array& b, const std::vector<int>& li,
                              const std::vector<int>& ri, int gs, int bits) {
  return picked_products(x,
                         dequantize(q, astype(s, float64), astype(b, float64),
                                    gs, bits, "affine", float64),
                         li, ri);
}

double tol(Dtype dt) { return dt == float32 ? 1e-4 : 4 * tolerance(dt); }

array ints(const std::vector<int>& v, Shape shape) {
  return array(v, std::move(shape), int32);
}

TEST(GatherQmm, PicksReadInPlaceForEveryDtypeAndWidth) {
  // -1 is the last matrix, 7 clamps to it, -6 to the first.
  std::vector<int> li = {0, 3, 1, 2, -1, 0}, ri = {4, 0, -1, 7, 2, -6};
  for (Dtype dt : {float32, float16, bfloat16}) {
    for (int bits : {3, 4, 8}) {
      array w = random_array({5, 36, 128}, dt, -1, 1);
      auto [q, s, b] = quantize(w, 64, bits);
      for (int rows : {1, 3}) {
        array x = random_array({4, rows, 128}, dt, -1, 1);
        array got = gather_qmm(x, q, s, b, ints(li, {6}), ints(ri, {6}), true,
                               64, bits);
        ASSERT_EQ(got.shape(), (Shape{6, rows, 36}));
        ASSERT_EQ(got.dtype(), dt);
        // The picks' codes read through their indices, not taken first.
        ASSERT_TRUE(got.has_primitive());
        EXPECT_STREQ(got.primitive().name(), "QuantizedMatmul");
        EXPECT_EQ(got.inputs().size(), 5u);
        EXPECT_TRUE(all_close(to_doubles(got),
                              reference(x, q, s, b, li, ri, 64, bits),
                              tol(dt), tol(dt)))
            << dtype_name(dt) << " bits=" << bits << " rows=" << rows;
      }
    }
  }
}

TEST(GatherQmm, MicroscalingPicksReadInPlace) {
  // The microscaling modes' picks: while the picks' rows number fewer
  // than 8 per matrix (here up to 6), they read the codes through the
  // indices (QuantizedMatmulFp with the indices as its fourth input); 16
  // rows dequantize each matrix once for gather_mm. Against float64
  // products of the exactly dequantized weights (code value * scale).
  std::vector<int> li = {0, 3, 1, 2, -1, 0}, ri = {4, 0, -1, 7, 2, -6};
  struct Mode {
    const char* name;
    int group, bits;
  };
  for (Mode md : {Mode{"mxfp4", 32, 4}, Mode{"mxfp8", 32, 8},
                  Mode{"nvfp4", 16, 4}}) {
    array w = multiply(random_array({5, 36, 96}, float32, -1, 1),
                       random_array({5, 36, 1}, float32, 0.05, 20));
    auto [q, s] = quantize_fp(w, md.group, md.bits, md.name);
    array wd = dequantize_fp(q, s, md.group, md.bits, md.name, float64);
    for (Dtype dt : {float32, float16, bfloat16}) {
      for (int rows : {1, 3, 6, 16}) {
        array x = random_array({4, rows, 96}, dt, -1, 1);
        array got = gather_qmm(x, q, s, std::nullopt, ints(li, {6}),
                               ints(ri, {6}), true, md.group, md.bits,
                               md.name);
        ASSERT_EQ(got.shape(), (Shape{6, rows, 36}));
        ASSERT_EQ(got.dtype(), dt);
        ASSERT_TRUE(got.has_primitive());
        EXPECT_STREQ(got.primitive().name(),
                     rows < 8 ? "QuantizedMatmulFp" : "GatherMM");
        if (rows < 8) EXPECT_EQ(got.inputs().size(), 4u);
        // Weights up to 6 * 20: absolute errors scale with the products.
        auto want = picked_products(x, wd, li, ri);
        double largest = 0;
        for (double v : want) largest = std::max(largest, std::abs(v));
        EXPECT_TRUE(all_close(to_doubles(got), want, tol(dt),
                              tol(dt) * largest))
            << md.name << " " << dtype_name(dt) << " rows=" << rows;
      }
    }
  }
}

TEST(GatherQmm, PicksSplitAcrossThreadsMidMatrix) {
  // Long rows: the CPU's loop over every pick's output rows splits into
  // chunks that start inside a matrix and run into the next.
  std::vector<int> li = {1, 0, 1}, ri = {2, 0, 2};
  for (int bits : {4, 5}) {
    array w = random_array({3, 100, 2048}, float32, -1, 1);
    auto [q, s, b] = quantize(w, 128, bits);
    array x = random_array({2, 1, 2048}, float32, -1, 1);
    array got = gather_qmm(x, q, s, b, ints(li, {3}), ints(ri, {3}), true,
                           128, bits);
    EXPECT_TRUE(all_close(to_doubles(got),
                          reference(x, q, s, b, li, ri, 128, bits), 1e-4,
                          1e-4))
        << "bits=" << bits;
  }
}

TEST(GatherQmm, StridedIndicesAreReadAsTheirValues) {
  // A transposed index array and a strided slice: views the kernels must
  // not read as packed.
  array w = random_array({5, 20, 64}, float32, -1, 1);
  auto [q, s, b] = quantize(w, 64, 4);
  array x = random_array({3, 1, 64}, float32, -1, 1);
  array rhs = transpose(ints({4, 2, 0, 3, 1, 2}, {2, 3})); // (3, 2)
  array lhs = slice(ints({0, 9, 1, 9, 2, 9}, {6}), Shape{0}, Shape{6},
                    Shape{2});
  array got = gather_qmm(x, q, s, b, reshape(lhs, {3, 1}), rhs, true, 64, 4);
  ASSERT_EQ(got.shape(), (Shape{3, 2, 1, 20}));
  // lhs is {0, 1, 2}; rhs rows are {4, 3}, {2, 1}, {0, 2}.
  EXPECT_TRUE(all_close(to_doubles(got),
                        reference(x, q, s, b, {0, 0, 1, 1, 2, 2},
                                  {4, 3, 2, 1, 0, 2}, 64, 4),
                        1e-4, 1e-4));
  // A strided uint32 rhs already of the picks' shape reaches the kernel
  // without a cast or a broadcast.
  array rhs1 = slice(astype(ints({4, 9, 3, 9, 2, 9}, {6}), uint32), Shape{0},
                     Shape{6}, Shape{2});
  eval(rhs1);
  array got1 = gather_qmm(x, q, s, b, std::nullopt, rhs1, true, 64, 4);
  EXPECT_TRUE(all_close(to_doubles(got1),
                        reference(x, q, s, b, {0, 1, 2}, {4, 3, 2}, 64, 4),
                        1e-4, 1e-4));
}

TEST(GatherQmm, ManyRowsPerMatrixDequantizeOnce) {
  // 6 picks of 40 rows over 5 matrices: past 8 rows per matrix.
  std::vector<int> li = {0, 1, 1, 0, 1, 0}, ri = {4, 0, 4, 2, -1, 1};
  array w = random_array({5, 24, 64}, float32, -1, 1);
  auto [q, s, b] = quantize(w, 32, 4);
  array x = random_array({2, 40, 64}, float32, -1, 1);
  array got = gather_qmm(x, q, s, b, ints(li, {6}), ints(ri, {6}), true, 32,
                         4);
  EXPECT_TRUE(all_close(to_doubles(got), reference(x, q, s, b, li, ri, 32, 4),
                        1e-4, 1e-4));
  // Without transpose: w quantized as (in, out), x @ wd.
  array wt = random_array({5, 64, 32}, float32, -1, 1);
  auto [qt, st, bt] = quantize(wt, 32, 4);
  array got_t = gather_qmm(random_array({2, 1, 64}, float32, -1, 1), qt, st,
                           bt, ints({0, 1}, {2}), ints({3, 3}, {2}), false,
                           32, 4);
  EXPECT_EQ(got_t.shape(), (Shape{2, 1, 32}));
}

TEST(GatherQmm, BroadcastAndAbsentIndices) {
  array w = random_array({3, 20, 64}, float16, -1, 1);
  auto [q, s, b] = quantize(w, 64, 4);
  // lhs (3, 1) against rhs (1, 2): a (3, 2) batch of picks.
  array x = random_array({3, 1, 64}, float16, -1, 1);
  array got = gather_qmm(x, q, s, b, ints({0, 1, 2}, {3, 1}),
                         ints({2, 0}, {1, 2}), true, 64, 4);
  ASSERT_EQ(got.shape(), (Shape{3, 2, 1, 20}));
  std::vector<int> li = {0, 0, 1, 1, 2, 2}, ri = {2, 0, 2, 0, 2, 0};
  EXPECT_TRUE(all_close(to_doubles(got), reference(x, q, s, b, li, ri, 64, 4),
                        tol(float16), tol(float16)));
  // No lhs: x's own batch (2, 3) in order, rhs of the same shape.
  array x2 = random_array({2, 3, 1, 64}, float16, -1, 1);
  array got2 = gather_qmm(x2, q, s, b, std::nullopt,
                          ints({1, 2, 0, 0, 1, 2}, {2, 3}), true, 64, 4);
  ASSERT_EQ(got2.shape(), (Shape{2, 3, 1, 20}));
  EXPECT_TRUE(all_close(to_doubles(got2),
                        reference(reshape(x2, {6, 1, 64}), q, s, b,
                                  {0, 1, 2, 3, 4, 5}, {1, 2, 0, 0, 1, 2}, 64,
                                  4),
                        tol(float16), tol(float16)));
}

TEST(GatherQmm, GradientOfXMatchesTheComposition) {
  array w = random_array({4, 16, 64}, float32, -1, 1);
  auto [q, s, b] = quantize(w, 32, 4);
  array li = ints({1, 0, 1}, {3}), ri = ints({3, -1, 0}, {3});
  array x = random_array({2, 2, 64}, float32, -1, 1);
  auto loss = [&](bool composed) {
    return [=](const std::vector<array>& in) {
      array y = composed
                    ? quantized_matmul(take(in[0], li, 0), take(q, ri, 0),
                                       take(s, ri, 0), take(b, ri, 0), true,
                                       32, 4)
                    : gather_qmm(in[0], q, s, b, li, ri, true, 32, 4);
      return std::vector<array>{sum(multiply(y, y))};
    };
  };
  auto [v1, g1] = vjp(loss(false), {x}, {array(1.0f)});
  auto [v2, g2] = vjp(loss(true), {x}, {array(1.0f)});
  EXPECT_TRUE(all_close(to_doubles(v1[0]), to_doubles(v2[0]), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(to_doubles(g1[0]), to_doubles(g2[0]), 1e-4, 1e-4));
}

TEST(GatherQmm, BadInputRaises) {
  array w = random_array({2, 8, 64}, float32);
  auto [q, s, b] = quantize(w);
  array x = random_array({1, 64}, float32);
  expect_invalid(
      [&] { gather_qmm(x, q, s, b, std::nullopt, array({0.5f}, {1})); },
      "gather_qmm", "rhs_indices must be integers");
  expect_invalid([&] { gather_qmm(x, q, s, std::nullopt); }, "gather_qmm",
                 "needs biases");
  expect_invalid([&] { gather_qmm(random_array({64}, float32), q, s, b); },
                 "gather_qmm", "at least 2 dimensions");
  expect_invalid(
      [&] { gather_qmm(x, q, reshape(s, {1, 16, 1}), b, std::nullopt,
                       ints({0}, {1})); },
      "gather_qmm", "batch dimensions");
  expect_invalid(
      [&] { gather_qmm(random_array({1, 32}, float32), q, s, b, std::nullopt,
                       ints({1}, {1})); },
      "quantized_matmul", "does not match");
}

} // namespace
} // namespace kiln::test
