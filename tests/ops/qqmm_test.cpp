// qqmm and gather_qqmm: the product of the operands' quantized values
// (dequantize_fp of quantize_fp, each checked against loops in
// quantized_test.cpp) summed in float64 loops here; the gradients'
// quantized products; bad input naming the op, shapes and dtypes.
#include <stdexcept>
#include <string>

#include "kiln/ops/quantized.h"
#include "kiln/transforms/autograd.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

// a's values through the mode along its last axis, as doubles.
std::vector<double> through(const array& a, const std::string& mode) {
  auto [q, s] = quantize_fp(a, mode == "nvfp4" ? 16 : 32,
                            mode == "nvfp4" ? 4 : 8, mode);
  return to_doubles(dequantize_fp(q, s, mode == "nvfp4" ? 16 : 32,
                                  mode == "nvfp4" ? 4 : 8, mode, float32));
}

// (m, k) x (n, k)^T in float64.
std::vector<double> product(const std::vector<double>& a,
                            const std::vector<double>& b, int m, int n,
                            int k) {
  std::vector<double> out(size_t(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int t = 0; t < k; ++t)
        out[size_t(i) * n + j] += a[size_t(i) * k + t] * b[size_t(j) * k + t];
  return out;
}

TEST(Qqmm, ProductOfQuantizedOperands) {
  for (std::string mode : {"nvfp4", "mxfp8"}) {
    for (Dtype dt : {float32, bfloat16}) {
      array x = random_array({6, 64}, dt), w = random_array({20, 64}, dt);
      auto want = product(through(x, mode), through(w, mode), 6, 20, 64);
      double tol = dt == float32 ? 1e-5 : 1e-2;
      array y = qqmm(x, w, std::nullopt, std::nullopt, std::nullopt, mode);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(all_close(to_doubles(y), want, tol, tol)) << mode;
      // w quantized ahead: the same values.
      auto [q, s] = quantize_fp(w, mode == "nvfp4" ? 16 : 32,
                                mode == "nvfp4" ? 4 : 8, mode);
      array yq = qqmm(x, q, s, std::nullopt, std::nullopt, mode);
      EXPECT_TRUE(all_close(to_doubles(yq), want, tol, tol)) << mode;
      // x transposed in memory.
      array xt = transpose(random_array({64, 6}, dt));
      auto want_t = product(through(xt, mode), through(w, mode), 6, 20, 64);
      EXPECT_TRUE(all_close(to_doubles(qqmm(xt, w, std::nullopt, std::nullopt,
                                            std::nullopt, mode)),
                            want_t, tol, tol))
          << mode;
    }
  }
}

TEST(Qqmm, GradientsAreQuantizedProducts) {
  array x = random_array({32, 64}, float32);
  array w = random_array({48, 64}, float32);
  array g = random_array({32, 48}, float32);
  auto loss = [&](const std::vector<array>& in) {
    return std::vector<array>{sum(multiply(qqmm(in[0], in[1]), g))};
  };
  auto [out, grads] = vjp(loss, {x, w}, {array(1.0f)});
  // dx = qqmm(g, w.T): g and w.T through nvfp4 along N = 48.
  auto t = [](const array& a) { return through(contiguous(transpose(a)),
                                                "nvfp4"); };
  auto want_dx = product(through(g, "nvfp4"), t(w), 32, 64, 48);
  auto want_dw = product(t(g), t(x), 48, 64, 32);
  EXPECT_TRUE(all_close(to_doubles(grads[0]), want_dx, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(to_doubles(grads[1]), want_dw, 1e-5, 1e-5));
}

TEST(Qqmm, GatherPicksMatrices) {
  array x = random_array({2, 3, 32}, float32);
  array w = random_array({3, 8, 32}, float32);
  array ri = array({2u, 0u}, Shape{2}, uint32);
  array y = gather_qqmm(x, w, std::nullopt, std::nullopt, ri);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 8}));
  for (int b = 0; b < 2; ++b) {
    int e = b == 0 ? 2 : 0;
    array xb = slice(x, {b, 0, 0}, {b + 1, 3, 32});
    array wb = slice(w, {e, 0, 0}, {e + 1, 8, 32});
    auto want = product(through(reshape(xb, {3, 32}), "nvfp4"),
                        through(reshape(wb, {8, 32}), "nvfp4"), 3, 8, 32);
    EXPECT_TRUE(all_close(to_doubles(slice(y, {b, 0, 0}, {b + 1, 3, 8})),
                          want, 1e-5, 1e-5))
        << b;
  }
}

TEST(Qqmm, BadInputNamesTheOp) {
  array x = random_array({4, 64}, float32), w = random_array({8, 64}, float32);
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_NE(message([&] { qqmm(x, w, std::nullopt, {}, {}, "mxfp4"); })
                .find("[qqmm] Only 'nvfp4' and 'mxfp8'"),
            std::string::npos);
  std::string m = message([&] {
    qqmm(x, random_array({8, 48}, float32));
  });
  EXPECT_NE(m.find("[qqmm]"), std::string::npos);
  EXPECT_NE(m.find("(4, 64)"), std::string::npos) << m;
  EXPECT_NE(m.find("(8, 48)"), std::string::npos) << m;
  EXPECT_NE(message([&] { qqmm(astype(x, int32), w); }).find("int32"),
            std::string::npos);
  EXPECT_NE(message([&] {
              gather_qqmm(x, w, std::nullopt, {}, {}, 32);
            }).find("[gather_qqmm]"),
            std::string::npos);
}

} // namespace
} // namespace kiln::test
