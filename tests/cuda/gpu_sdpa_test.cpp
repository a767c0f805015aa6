// GPU scaled dot-product attention against the CPU backend on random
// inputs: every float dtype, grouped-query heads, head dimensions of each
// kernel width (and past them, on the CPU), query/key lengths on both sides
// of each other, causal, boolean, additive and broadcast masks, sinks,
// transposed and sliced q/k/v, inf/NaN, empty lengths, many rows, and the
// gradients of the fallback graph.
#include <cmath>
#include <limits>

#include "cuda/gpu_fixture.h"
#include "kiln/ops/fast.h"

namespace kiln::test {
namespace {

using GpuSdpa = GpuTest;

double sdpa_tol(Dtype dt) {
  return dt == float32 || dt == float64 ? 4 * tolerance(dt) : tolerance(dt);
}

struct Qkv {
  array q, k, v;
};

Qkv random_qkv(int B, int nq, int nkv, int lq, int lk, int d, int dv,
               Dtype dt) {
  return {random_array({B, nq, lq, d}, dt, -1, 1),
          random_array({B, nkv, lk, d}, dt, -1, 1),
          random_array({B, nkv, lk, dv}, dt, -2, 2)};
}

// q, k, v and optional mask/sinks as inputs (mask first, then sinks).
::testing::AssertionResult attention_agrees(const Qkv& t,
                                            const std::string& mode,
                                            const std::optional<array>& mask,
                                            const std::optional<array>& sinks,
                                            double tol) {
  std::vector<array> in = {t.q, t.k, t.v};
  if (mask) in.push_back(*mask);
  if (sinks) in.push_back(*sinks);
  float scale = 1.0f / std::sqrt(static_cast<float>(t.q.shape(3)));
  bool has_mask = mask.has_value(), has_sinks = sinks.has_value();
  // The fused kernel for every shape, then the op's own choice (the matmul
  // graph on the GPU for long query lengths). The graph rounds the scores to
  // a 16-bit input dtype before its float softmax, as MLX's and PyTorch's
  // unfused paths do; the fused kernels keep them in float.
  bool half = t.q.itemsize() == 2;
  for (bool fused : {true, false}) {
    auto f = [&](const std::vector<array>& v, Device d) {
      std::optional<array> m, s;
      if (has_mask) m = v[3];
      if (has_sinks) s = v.back();
      return fast::scaled_dot_product_attention(v[0], v[1], v[2], scale, mode,
                                                m, s, fused, d);
    };
    auto r = same_on_devices(f, in, fused || !half ? tol : 4 * tol);
    if (!r) return r << (fused ? " (fused kernel)" : " (op's choice)");
  }
  return ::testing::AssertionSuccess();
}

TEST_F(GpuSdpa, EveryDtypeHeadDimAndLength) {
  for (Dtype dt : float_dtypes()) {
    for (auto [d, dv] : {std::pair{8, 8}, std::pair{64, 64}, std::pair{80, 48},
                         std::pair{128, 128}, std::pair{256, 200}}) {
      for (auto [lq, lk] : {std::pair{1, 1}, std::pair{1, 130},
                            std::pair{7, 33}, std::pair{33, 7}}) {
        for (int nkv : {4, 2, 1}) {
          Qkv t = random_qkv(2, 4, nkv, lq, lk, d, dv, dt);
          EXPECT_TRUE(
              attention_agrees(t, "", std::nullopt, std::nullopt, sdpa_tol(dt)))
              << dtype_name(dt) << " d=" << d << " dv=" << dv << " lq=" << lq
              << " lk=" << lk << " nkv=" << nkv;
        }
      }
    }
  }
}

TEST_F(GpuSdpa, MasksAndSinks) {
  for (Dtype dt : float_dtypes()) {
    for (auto [lq, lk] :
         {std::pair{9, 9}, std::pair{5, 40}, std::pair{40, 5}}) {
      Qkv t = random_qkv(2, 4, 2, lq, lk, 64, 64, dt);
      array sinks = random_array({4}, dt, -1, 1);
      // Boolean: about a third hidden, and the first query row all hidden
      // (the CPU then averages every value: all scores are equally low).
      array keep =
          greater(random_array({2, 4, lq, lk}, float32, 0, 1), array(0.33f));
      keep = concatenate({zeros({2, 4, 1, lk}, bool_),
                          slice(keep, Shape{0, 0, 1, 0}, Shape{2, 4, lq, lk})},
                         2);
      array additive = random_array({2, 4, lq, lk}, dt, -3, 1);
      array per_query = random_array({lq, lk}, dt, -1, 1); // broadcast mask
      std::vector<std::pair<std::string, std::optional<array>>> masks = {
          {"none", std::nullopt},
          {"bool", keep},
          {"additive", additive},
          {"broadcast", per_query}};
      for (auto& [name, mask] : masks) {
        for (bool with_sinks : {false, true}) {
          std::optional<array> s;
          if (with_sinks) s = sinks;
          EXPECT_TRUE(attention_agrees(t, "", mask, s, sdpa_tol(dt)))
              << dtype_name(dt) << " mask " << name << " sinks " << with_sinks
              << " lq=" << lq << " lk=" << lk;
        }
      }
      for (bool with_sinks : {false, true}) {
        std::optional<array> s;
        if (with_sinks) s = sinks;
        EXPECT_TRUE(
            attention_agrees(t, "causal", std::nullopt, s, sdpa_tol(dt)))
            << dtype_name(dt) << " causal sinks " << with_sinks << " lq=" << lq
            << " lk=" << lk;
      }
    }
  }
}

TEST_F(GpuSdpa, StridedInputs) {
  for (Dtype dt : {float16, float32}) {
    // (B, L, N, D) buffers seen as (B, N, L, D), and every other key.
    array q = swapaxes(random_array({2, 11, 4, 64}, dt, -1, 1), 1, 2);
    array k = slice(random_array({2, 2, 46, 64}, dt, -1, 1), Shape{0, 0, 0, 0},
                    Shape{2, 2, 46, 64}, Shape{1, 1, 2, 1});
    array v = swapaxes(random_array({2, 23, 2, 64}, dt), 1, 2);
    EXPECT_TRUE(attention_agrees({q, k, v}, "", std::nullopt, std::nullopt,
                                 sdpa_tol(dt)))
        << dtype_name(dt);
    array sinks = slice(random_array({8}, dt), Shape{0}, Shape{8}, Shape{2});
    EXPECT_TRUE(attention_agrees({q, k, v}, "causal", std::nullopt, sinks,
                                 sdpa_tol(dt)))
        << dtype_name(dt);
  }
}

TEST_F(GpuSdpa, InfinitiesNaNAndEmpty) {
  Qkv t = random_qkv(1, 2, 2, 4, 6, 32, 32, float32);
  double inf = std::numeric_limits<double>::infinity();
  // Additive -inf: some keys of row 0, every key of row 1 (NaN on the CPU),
  // +inf in row 2 (NaN), NaN in row 3.
  std::vector<double> m = to_doubles(random_array({1, 2, 4, 6}, float32));
  for (int h = 0; h < 2; ++h) {
    double* r = m.data() + h * 24;
    r[0] = -inf;
    r[3] = -inf;
    for (int j = 0; j < 6; ++j) r[6 + j] = -inf;
    r[12 + 2] = inf;
    r[18 + 5] = std::nan("");
  }
  array mask = array(m.begin(), {1, 2, 4, 6}, float32);
  for (bool with_sinks : {false, true}) {
    std::optional<array> s;
    if (with_sinks) s = random_array({2}, float32);
    EXPECT_TRUE(attention_agrees(t, "", mask, s, sdpa_tol(float32)))
        << "sinks " << with_sinks;
  }
  // No queries; no keys (0 / 0 = NaN rows, or 0 with sinks).
  Qkv no_q = random_qkv(1, 2, 2, 0, 5, 16, 16, float32);
  EXPECT_TRUE(attention_agrees(no_q, "", std::nullopt, std::nullopt, 0));
  Qkv no_k = random_qkv(1, 2, 2, 3, 0, 16, 16, float32);
  EXPECT_TRUE(attention_agrees(no_k, "", std::nullopt, std::nullopt, 0));
  EXPECT_TRUE(
      attention_agrees(no_k, "", std::nullopt, random_array({2}, float32), 0));
}

TEST_F(GpuSdpa, LongSequences) {
  // Prefill-sized: a few hundred queries over two thousand keys.
  for (Dtype dt : {float16, bfloat16, float32}) {
    Qkv t = random_qkv(1, 4, 1, 300, 2048, 128, 128, dt);
    for (const char* mode : {"", "causal"}) {
      EXPECT_TRUE(attention_agrees(t, mode, std::nullopt, std::nullopt,
                                   sdpa_tol(dt)))
          << dtype_name(dt) << " mode '" << mode << "'";
    }
  }
}

TEST_F(GpuSdpa, ManyRowsAndWideHeads) {
  // 72000 query rows (past a grid dimension), then a head dimension past
  // the widest kernel, which runs on the CPU.
  Qkv many = random_qkv(1, 8, 2, 9000, 5, 16, 16, bfloat16);
  EXPECT_TRUE(attention_agrees(many, "causal", std::nullopt, std::nullopt,
                               sdpa_tol(bfloat16)));
  Qkv wide = random_qkv(1, 2, 1, 3, 4, 300, 300, float32);
  EXPECT_TRUE(attention_agrees(wide, "", std::nullopt, std::nullopt,
                               sdpa_tol(float32)));
}

TEST_F(GpuSdpa, GradientsMatch) {
  for (Dtype dt : {float32, bfloat16}) {
    Qkv t = random_qkv(1, 4, 2, 5, 7, 16, 16, dt);
    array mask = random_array({5, 7}, dt, -1, 1);
    array ct = random_array({1, 4, 5, 16}, dt);
    for (int k = 0; k < 3; ++k) {
      auto f = [&](const std::vector<array>& v, Device d) {
        DefaultDeviceScope scope(d);
        Fn fun = [&](const std::vector<array>& in) {
          return std::vector<array>{fast::scaled_dot_product_attention(
              in[0], in[1], in[2], 0.25f, "", v[3])};
        };
        return vjp(fun, {v[0], v[1], v[2]}, {ct}).second[k];
      };
      EXPECT_TRUE(same_on_devices(f, {t.q, t.k, t.v, mask}, 4 * sdpa_tol(dt)))
          << dtype_name(dt) << " input " << k;
    }
  }
}

} // namespace
} // namespace kiln::test
