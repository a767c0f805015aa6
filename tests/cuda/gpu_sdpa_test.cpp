// GPU scaled dot-product attention against the CPU backend on random
// inputs: every float dtype, grouped-query heads, head dimensions of each
// kernel width (and past them, on the CPU), query/key lengths on both sides
// of each other, causal, boolean, additive and broadcast masks, sinks,
// transposed and sliced q/k/v, inf/NaN, empty lengths, many rows, and the
// gradients of the fallback graph. The Flash tests aim at the tensor-core
// kernel (float16/bfloat16, head dimension 64 or 128): lengths around its
// 64-row tiles, causal tiles skipped or not, masks hiding whole rows and
// whole key tiles, grouped-query heads, (B, L, H, D) buffers, more query
// tiles than its grid, many key tiles with a running max that moves, and
// the layouts and shapes it leaves to the warp kernel. Where cuDNN is
// present those shapes run on its engines (no mask, 64 query rows or more);
// the tests of them run with cuDNN on and off, and CudnnPath checks that
// the cuDNN path really ran.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_set>

#include "cuda/gpu_fixture.h"
#include "kiln/config.h"
#include "kiln/ops/fast.h"
#include "kiln/primitives/fast.h"

#if KILN_HAS_CUDA
#include "kiln/backend/cuda/cudnn_attention.h"
#endif

namespace kiln::test {
namespace {

using GpuSdpa = GpuTest;

// The tensor-core shapes run on cuDNN's engines where cuDNN is present and
// takes them, else on kiln's own kernels. A BOTH_PATHS_TEST runs its body
// twice: as GpuSdpa (the default path) and as GpuSdpaOwnKernels, with cuDNN
// off.
class GpuSdpaOwnKernels : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
#if KILN_HAS_CUDA
    was_enabled_ = cuda::set_cudnn_attention_enabled(false);
#endif
  }
  void TearDown() override {
#if KILN_HAS_CUDA
    cuda::set_cudnn_attention_enabled(was_enabled_);
#endif
  }

 private:
  bool was_enabled_ = true;
};

#define BOTH_PATHS_TEST(name)                          \
  void name##_body();                                  \
  TEST_F(GpuSdpa, name) { name##_body(); }             \
  TEST_F(GpuSdpaOwnKernels, name) { name##_body(); }   \
  void name##_body()

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
  // graph on the GPU for long query lengths the fused kernels do not serve
  // well). The graph rounds the scores to a 16-bit input dtype before its
  // float softmax, as MLX's and PyTorch's unfused paths do; the fused
  // kernels keep them in float, and the tensor-core one (float16/bfloat16)
  // rounds the softmax weights to the input dtype before multiplying the
  // values, as the graph does too.
  bool half = t.q.itemsize() == 2;
  for (bool fused : {true, false}) {
    auto f = [&](const std::vector<array>& v, Device d) {
      std::optional<array> m, s;
      if (has_mask) m = v[3];
      if (has_sinks) s = v.back();
      return fast::scaled_dot_product_attention(v[0], v[1], v[2], scale, mode,
                                                m, s, fused, d);
    };
    auto r = same_on_devices(f, in, !half ? tol : fused ? 2 * tol : 4 * tol);
    if (!r) return r << (fused ? " (fused kernel)" : " (op's choice)");
  }
  return ::testing::AssertionSuccess();
}

// attention_agrees with neither mask nor sinks, without and with the causal
// rule; a failure names the mode.
::testing::AssertionResult agrees_plain_and_causal(const Qkv& t, double tol) {
  for (const char* mode : {"", "causal"}) {
    auto r = attention_agrees(t, mode, std::nullopt, std::nullopt, tol);
    if (!r) return r << " mode '" << mode << "'";
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

// Whether a primitive of type P is in the graph behind outs (before eval).
template <typename P>
bool graph_has(const std::vector<array>& outs) {
  std::vector<array> todo = outs;
  std::unordered_set<uintptr_t> seen;
  while (!todo.empty()) {
    array a = todo.back();
    todo.pop_back();
    if (!seen.insert(a.id()).second || !a.has_primitive()) continue;
    if (dynamic_cast<const P*>(&a.primitive())) return true;
    for (auto& in : a.inputs()) todo.push_back(in);
  }
  return false;
}

// The fused primitive for inference shapes and under vjp where the fused
// backward covers them (its gradients come from ScaledDotProductAttentionVjp);
// the graph under jvp, whose rule for the fused primitive would rebuild the
// graph's forward anyway, and under vjp for shapes the fused backward lacks.
TEST_F(GpuSdpa, GraphUnderGradientTransformations) {
  DefaultDeviceScope scope(Device::gpu);
  auto is_fused = [](const array& a) {
    return a.has_primitive() &&
           dynamic_cast<const fast::ScaledDotProductAttention*>(
               &a.primitive()) != nullptr;
  };
  struct Case {
    const char* name;
    Dtype dt;
    int d;
    bool sinks;
    bool fused_backward;
  };
  for (Case c : {Case{"bfloat16 d=64", bfloat16, 64, false, true},
                 Case{"float16 d=128", float16, 128, false, true},
                 Case{"d=96", bfloat16, 96, false, false},
                 Case{"sinks", bfloat16, 64, true, false},
                 Case{"float32", float32, 64, false, false}}) {
    Qkv t = random_qkv(2, 4, 4, 64, 64, c.d, c.d, c.dt);
    std::optional<array> sinks;
    if (c.sinks) sinks = random_array({4}, c.dt, -1, 1);
    auto attend = [&](const std::vector<array>& in) {
      return fast::scaled_dot_product_attention(in[0], in[1], in[2], 0.125f,
                                                "causal", std::nullopt, sinks);
    };
    array out = attend({t.q, t.k, t.v});
    bool fused_under_vjp = false, fused_under_jvp = true;
    Fn f = [&](const std::vector<array>& in) {
      array o = attend(in);
      fused_under_vjp = is_fused(o);
      return std::vector<array>{o};
    };
    auto [outs, grads] = vjp(f, {t.q, t.k, t.v}, {ones_like(out)});
    EXPECT_EQ(fused_under_vjp, c.fused_backward) << c.name;
    EXPECT_EQ(graph_has<fast::ScaledDotProductAttentionVjp>(grads),
              c.fused_backward)
        << c.name;
    Fn g = [&](const std::vector<array>& in) {
      array o = attend(in);
      fused_under_jvp = is_fused(o);
      return std::vector<array>{o};
    };
    auto [jouts, tangents] =
        jvp(g, {t.q, t.k, t.v}, {ones_like(t.q), ones_like(t.k),
                                 ones_like(t.v)});
    EXPECT_FALSE(fused_under_jvp) << c.name;
    eval(grads);
    eval(tangents);
    EXPECT_TRUE(all_close(to_doubles(outs[0]), to_doubles(out), 0.03, 0.03))
        << c.name;
    EXPECT_TRUE(all_close(to_doubles(jouts[0]), to_doubles(out), 0.03, 0.03))
        << c.name;
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
    EXPECT_TRUE(agrees_plain_and_causal(t, sdpa_tol(dt))) << dtype_name(dt);
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

// (B, L, H, D) buffers seen as (B, H, L, D), as GPT code makes them.
Qkv heads_last(int B, int nq, int nkv, int lq, int lk, int d, Dtype dt) {
  return {swapaxes(random_array({B, lq, nq, d}, dt, -1, 1), 1, 2),
          swapaxes(random_array({B, lk, nkv, d}, dt, -1, 1), 1, 2),
          swapaxes(random_array({B, lk, nkv, d}, dt, -2, 2), 1, 2)};
}

const std::vector<std::pair<int, int>> flash_lengths = {
    {1, 1},    {17, 17}, {64, 64},  {100, 100}, {257, 257}, {300, 300},
    {1, 300},  {17, 257}, {64, 100}, {100, 64}, {257, 17},  {300, 1},
    {65, 129}, {129, 65}};

BOTH_PATHS_TEST(FlashLengthsCausalAndGroupedHeads) {
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      for (auto [lq, lk] : flash_lengths) {
        // Grouped-query heads (4 query heads per key/value head) and plain.
        int nkv = lq % 2 == 0 ? 2 : 1;
        Qkv t = random_qkv(2, 4, nkv, lq, lk, d, d, dt);
        EXPECT_TRUE(agrees_plain_and_causal(t, sdpa_tol(dt)))
            << dtype_name(dt) << " d=" << d << " lq=" << lq << " lk=" << lk
            << " nkv=" << nkv;
      }
    }
  }
}

TEST_F(GpuSdpa, FlashMasks) {
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      for (auto [lq, lk] :
           {std::pair{70, 130}, std::pair{130, 70}, std::pair{1, 200}}) {
        Qkv t = random_qkv(2, 4, 1, lq, lk, d, d, dt);
        // About a third hidden; query row 0 entirely hidden (the CPU then
        // averages every value), and keys [64, 128) hidden for every row: a
        // key tile of lowest scores only.
        array keep =
            greater(random_array({2, 4, lq, lk}, float32, 0, 1), array(0.33f));
        keep = concatenate(
            {zeros({2, 4, 1, lk}, bool_),
             slice(keep, Shape{0, 0, 1, 0}, Shape{2, 4, lq, lk})},
            2);
        if (lk > 64) {
          int hi = std::min(lk, 128);
          keep = concatenate(
              {slice(keep, Shape{0, 0, 0, 0}, Shape{2, 4, lq, 64}),
               zeros({2, 4, lq, hi - 64}, bool_),
               slice(keep, Shape{0, 0, 0, hi}, Shape{2, 4, lq, lk})},
              3);
        }
        // Broadcast over batch and heads, with its first row hidden too.
        array keep_rows = greater(random_array({lq, lk}, float32, 0, 1),
                                  array(0.5f));
        keep_rows = concatenate(
            {zeros({1, lk}, bool_),
             slice(keep_rows, Shape{0, 0}, Shape{lq, lk})},
            0);
        keep_rows = slice(keep_rows, Shape{0, 0}, Shape{lq, lk});
        array additive = random_array({2, 4, lq, lk}, dt, -3, 1);
        array additive_rows = random_array({1, 1, lq, lk}, dt, -1, 1);
        std::vector<std::pair<std::string, array>> masks = {
            {"bool", keep},
            {"bool broadcast", keep_rows},
            {"additive", additive},
            {"additive broadcast", additive_rows}};
        for (auto& [name, mask] : masks) {
          EXPECT_TRUE(
              attention_agrees(t, "", mask, std::nullopt, sdpa_tol(dt)))
              << dtype_name(dt) << " d=" << d << " mask " << name
              << " lq=" << lq << " lk=" << lk;
        }
      }
    }
  }
}

BOTH_PATHS_TEST(FlashHeadsLastLayout) {
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      Qkv t = heads_last(2, 8, 2, 150, 150, d, dt);
      EXPECT_TRUE(agrees_plain_and_causal(t, sdpa_tol(dt)))
          << dtype_name(dt) << " d=" << d;
      // Queries from a (B, L, 3, H, D) projection, as a fused qkv matmul
      // makes them: rows 3 * H * D apart.
      array qkv = random_array({2, 90, 3, 4, d}, dt, -1, 1);
      auto part = [&](int w) {
        array x = slice(qkv, Shape{0, 0, w, 0, 0}, Shape{2, 90, w + 1, 4, d});
        return swapaxes(reshape(x, {2, 90, 4, d}), 1, 2);
      };
      EXPECT_TRUE(attention_agrees({part(0), part(1), part(2)}, "causal",
                                   std::nullopt, std::nullopt, sdpa_tol(dt)))
          << dtype_name(dt) << " d=" << d << " fused qkv";
    }
  }
}

TEST_F(GpuSdpa, FlashLayoutsLeftToTheWarpKernel) {
  // Rows 65 elements apart (not 16-byte aligned), features 2 apart, and a
  // view starting one element in: the warp kernel reads them all.
  for (Dtype dt : {float16, bfloat16}) {
    array wide = random_array({1, 2, 40, 65}, dt, -1, 1);
    array k_unaligned = slice(wide, Shape{0, 0, 0, 1}, Shape{1, 2, 40, 65});
    array spread = random_array({1, 2, 40, 128}, dt, -1, 1);
    array v_spread = slice(spread, Shape{0, 0, 0, 0}, Shape{1, 2, 40, 128},
                           Shape{1, 1, 1, 2});
    array q = random_array({1, 4, 33, 64}, dt, -1, 1);
    array k = random_array({1, 2, 40, 64}, dt, -1, 1);
    array v = random_array({1, 2, 40, 64}, dt, -2, 2);
    EXPECT_TRUE(agrees_plain_and_causal({q, k_unaligned, v}, sdpa_tol(dt)))
        << dtype_name(dt) << " unaligned keys";
    EXPECT_TRUE(agrees_plain_and_causal({q, k, v_spread}, sdpa_tol(dt)))
        << dtype_name(dt) << " strided features";
  }
}

TEST_F(GpuSdpa, FlashShapesLeftToOtherPaths) {
  // Head dimension 96, sinks, float32, mixed head dimensions and no keys:
  // the warp kernel (fused) or the matmul graph (the op's choice).
  for (Dtype dt : {float16, bfloat16}) {
    Qkv d96 = random_qkv(1, 4, 2, 70, 90, 96, 96, dt);
    EXPECT_TRUE(attention_agrees(d96, "causal", std::nullopt, std::nullopt,
                                 sdpa_tol(dt)))
        << dtype_name(dt);
    Qkv mixed = random_qkv(1, 4, 2, 70, 90, 64, 128, dt);
    EXPECT_TRUE(attention_agrees(mixed, "", std::nullopt, std::nullopt,
                                 sdpa_tol(dt)))
        << dtype_name(dt);
    Qkv t = random_qkv(1, 4, 2, 70, 90, 64, 64, dt);
    EXPECT_TRUE(attention_agrees(t, "causal", std::nullopt,
                                 random_array({4}, dt, -1, 1), sdpa_tol(dt)))
        << dtype_name(dt) << " sinks";
    Qkv no_k = random_qkv(1, 2, 2, 3, 0, 64, 64, dt);
    EXPECT_TRUE(attention_agrees(no_k, "", std::nullopt, std::nullopt, 0))
        << dtype_name(dt) << " no keys";
  }
  Qkv f32 = random_qkv(1, 4, 2, 70, 90, 128, 128, float32);
  EXPECT_TRUE(attention_agrees(f32, "causal", std::nullopt, std::nullopt,
                               sdpa_tol(float32)));
}

BOTH_PATHS_TEST(FlashInfinitiesAndNaN) {
  // Additive -inf over some keys, over every key of a row (NaN on the
  // CPU), +inf (NaN) and NaN; NaN in a query row (that row is NaN) and in a
  // value row every query sees (that head is NaN).
  for (Dtype dt : {float16, bfloat16}) {
    Qkv t = random_qkv(1, 2, 2, 70, 80, 64, 64, dt);
    double inf = std::numeric_limits<double>::infinity();
    std::vector<double> m = to_doubles(random_array({1, 2, 70, 80}, dt));
    for (int h = 0; h < 2; ++h) {
      double* r = m.data() + h * 70 * 80;
      r[0] = -inf;
      r[70] = -inf; // row 0, the second key tile
      for (int j = 0; j < 80; ++j) r[80 + j] = -inf;
      r[2 * 80 + 5] = inf;
      r[3 * 80 + 66] = std::nan("");
    }
    array mask = astype(array(m.begin(), {1, 2, 70, 80}, float32), dt);
    EXPECT_TRUE(attention_agrees(t, "", mask, std::nullopt, sdpa_tol(dt)))
        << dtype_name(dt);
    std::vector<double> qd = to_doubles(t.q);
    qd[5 * 64 + 3] = std::nan("");
    std::vector<double> vd = to_doubles(t.v);
    vd[(80 + 5) * 64 + 1] = std::nan(""); // head 1, key 5: seen by all rows
    Qkv nan_in{astype(array(qd.begin(), t.q.shape(), float32), dt), t.k,
               astype(array(vd.begin(), t.v.shape(), float32), dt)};
    EXPECT_TRUE(agrees_plain_and_causal(nan_in, sdpa_tol(dt)))
        << dtype_name(dt);
  }
}

BOTH_PATHS_TEST(FlashLongAndMany) {
  // A training-sized causal sequence; then more query tiles (9000) than the
  // launcher's grid, so blocks loop over several.
  Qkv t = random_qkv(1, 2, 1, 1024, 1024, 128, 128, bfloat16);
  EXPECT_TRUE(attention_agrees(t, "causal", std::nullopt, std::nullopt,
                               sdpa_tol(bfloat16)));
  Qkv many = random_qkv(2, 4500, 1500, 1, 5, 64, 64, float16);
  EXPECT_TRUE(attention_agrees(many, "", std::nullopt, std::nullopt,
                               sdpa_tol(float16)));
}

BOTH_PATHS_TEST(FlashManyKeyTilesAndMovingMax) {
  // Many key tiles (the kernel alternates two tile buffers: odd and even
  // counts, a partial last tile), causal diagonals that cross a warp's 16
  // rows (Lk - Lq not a multiple of 16: in one key tile some warps see
  // every key and skip masking while others mask), and queries scaled by 8
  // so that the running max moves from tile to tile and rescales O.
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      for (auto [lq, lk] :
           {std::pair{200, 1000}, std::pair{150, 1087}, std::pair{77, 640}}) {
        Qkv t = random_qkv(1, 2, 1, lq, lk, d, d, dt);
        Qkv sharp{astype(multiply(t.q, array(8.0f)), dt), t.k, t.v};
        for (const char* mode : {"", "causal"}) {
          EXPECT_TRUE(attention_agrees(t, mode, std::nullopt, std::nullopt,
                                       sdpa_tol(dt)))
              << dtype_name(dt) << " d=" << d << " lq=" << lq << " lk=" << lk
              << " mode '" << mode << "'";
          EXPECT_TRUE(attention_agrees(sharp, mode, std::nullopt,
                                       std::nullopt, sdpa_tol(dt)))
              << dtype_name(dt) << " d=" << d << " lq=" << lq << " lk=" << lk
              << " mode '" << mode << "' sharp";
        }
      }
    }
  }
}

// ---- the fused backward -------------------------------------------------

// dq, dk, dv of the op under vjp on device d (the GPU's fused backward for
// the tensor-core shapes; the CPU differentiates the graph).
std::vector<array> sdpa_grads(const Qkv& t, const array& ct,
                              const std::string& mode,
                              const std::optional<array>& mask, Device d) {
  DefaultDeviceScope scope(d);
  float scale = 1.0f / std::sqrt(static_cast<float>(t.q.shape(3)));
  Fn fun = [&](const std::vector<array>& in) {
    return std::vector<array>{fast::scaled_dot_product_attention(
        in[0], in[1], in[2], scale, mode, mask)};
  };
  return vjp(fun, {t.q, t.k, t.v}, {ct}).second;
}

// g within tol of want relative to want's largest finite magnitude
// (gradients are sums over whole sequences: an element near zero carries
// the error of its neighbours), same shape and dtype.
::testing::AssertionResult close_to_largest(const array& g, const array& want,
                                            double tol) {
  if (g.shape() != want.shape() || g.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "shape/dtype differ: gpu " << g << " cpu " << want;
  }
  std::vector<double> w = to_doubles(want);
  double largest = 0;
  for (double x : w) {
    if (std::isfinite(x)) largest = std::max(largest, std::abs(x));
  }
  auto r = all_close(to_doubles(g), w, tol, tol * std::max(largest, 1e-3));
  if (!r) r << " (largest " << largest << ")";
  return r;
}

// The GPU's gradients against the CPU's (close_to_largest). Strides are
// not compared: the CPU's come from its graph (a transposed matmul for
// dk), the fused backward's are row-major. With fused, the GPU must have
// used the fused backward.
::testing::AssertionResult grads_agree(const Qkv& t, const std::string& mode,
                                       const std::optional<array>& mask,
                                       double tol,
                                       std::optional<array> ct = {},
                                       bool fused = true) {
  Shape out_shape = t.q.shape();
  out_shape.back() = t.v.shape(3);
  if (!ct) ct = random_array(out_shape, t.q.dtype(), -1, 1);
  auto g = sdpa_grads(t, *ct, mode, mask, Device::gpu);
  if (graph_has<fast::ScaledDotProductAttentionVjp>(g) != fused) {
    return ::testing::AssertionFailure()
           << (fused ? "the fused backward did not run"
                     : "the fused backward ran");
  }
  auto c = sdpa_grads(t, *ct, mode, mask, Device::cpu);
  eval(g);
  eval(c);
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    auto r = close_to_largest(g[i], c[i], tol);
    if (!r) return r << " (" << names[i] << ")";
  }
  return ::testing::AssertionSuccess();
}

double grad_tol(Dtype dt) { return 4 * tolerance(dt); }

// grads_agree with no mask, without and with the causal rule.
::testing::AssertionResult grads_agree_plain_and_causal(const Qkv& t,
                                                        double tol) {
  for (const char* mode : {"", "causal"}) {
    auto r = grads_agree(t, mode, std::nullopt, tol);
    if (!r) return r << " mode '" << mode << "'";
  }
  return ::testing::AssertionSuccess();
}

BOTH_PATHS_TEST(FlashGradientsLengthsCausalAndGroupedHeads) {
  const std::vector<std::pair<int, int>> lengths = {
      {1, 1},   {17, 17},  {64, 64},  {100, 100}, {257, 257},
      {1, 257}, {17, 100}, {100, 17}, {257, 64},  {64, 257}};
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      for (auto [lq, lk] : lengths) {
        // Grouped-query heads (4 query heads per key/value head) and plain.
        int nkv = (lq + lk) % 2 == 0 ? 1 : 4;
        Qkv t = random_qkv(2, 4, nkv, lq, lk, d, d, dt);
        EXPECT_TRUE(grads_agree_plain_and_causal(t, grad_tol(dt)))
            << dtype_name(dt) << " d=" << d << " lq=" << lq << " lk=" << lk
            << " nkv=" << nkv;
      }
    }
  }
}

TEST_F(GpuSdpa, FlashGradientsMasks) {
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      for (auto [lq, lk] : {std::pair{70, 130}, std::pair{130, 70}}) {
        Qkv t = random_qkv(2, 4, 2, lq, lk, d, d, dt);
        // About a third hidden and query row 0 entirely hidden (its P is
        // 1 / Lk: it reaches dv, and nothing reaches dq or dk from it).
        array keep =
            greater(random_array({2, 4, lq, lk}, float32, 0, 1), array(0.33f));
        keep = concatenate(
            {zeros({2, 4, 1, lk}, bool_),
             slice(keep, Shape{0, 0, 1, 0}, Shape{2, 4, lq, lk})},
            2);
        array keep_rows =
            greater(random_array({lq, lk}, float32, 0, 1), array(0.5f));
        array additive = random_array({2, 4, lq, lk}, dt, -3, 1);
        array additive_rows = random_array({1, 1, lq, lk}, dt, -1, 1);
        std::vector<std::pair<std::string, array>> masks = {
            {"bool", keep},
            {"bool broadcast", keep_rows},
            {"additive", additive},
            {"additive broadcast", additive_rows}};
        for (auto& [name, mask] : masks) {
          EXPECT_TRUE(grads_agree(t, "", mask, grad_tol(dt)))
              << dtype_name(dt) << " d=" << d << " mask " << name
              << " lq=" << lq << " lk=" << lk;
        }
      }
    }
  }
}

BOTH_PATHS_TEST(FlashGradientsLayouts) {
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      // (B, L, H, D) buffers, grouped heads.
      Qkv t = heads_last(2, 8, 2, 150, 150, d, dt);
      EXPECT_TRUE(grads_agree_plain_and_causal(t, grad_tol(dt)))
          << dtype_name(dt) << " d=" << d;
      // A broadcast cotangent (the gradient of a sum) and keys one element
      // into a buffer (rows not 16-byte aligned) are copied row-major
      // first; a transposed cotangent (a GPT block's, from its (B, L, H, D)
      // projection) is read in place through its strides.
      Qkv s = random_qkv(1, 4, 2, 90, 80, d, d, dt);
      array ones = broadcast_to(array(1.0f, dt), {1, 4, 90, d});
      EXPECT_TRUE(grads_agree(s, "causal", std::nullopt, grad_tol(dt), ones))
          << dtype_name(dt) << " d=" << d << " broadcast cotangent";
      array ct_t = swapaxes(random_array({1, 90, 4, d}, dt, -1, 1), 1, 2);
      EXPECT_TRUE(grads_agree(s, "", std::nullopt, grad_tol(dt), ct_t))
          << dtype_name(dt) << " d=" << d << " transposed cotangent";
      array wide = random_array({1, 2, 80, d + 1}, dt, -1, 1);
      Qkv u{s.q, slice(wide, Shape{0, 0, 0, 1}, Shape{1, 2, 80, d + 1}),
            s.v};
      EXPECT_TRUE(grads_agree(u, "causal", std::nullopt, grad_tol(dt)))
          << dtype_name(dt) << " d=" << d << " unaligned keys";
    }
  }
}

BOTH_PATHS_TEST(FlashGradientsLongAndMany) {
  // A training-sized causal sequence (16 key tiles, each summing over up to
  // 16 query tiles), then more key tiles (9000) than the launcher's grid.
  Qkv t = random_qkv(1, 4, 2, 1024, 1024, 128, 128, bfloat16);
  EXPECT_TRUE(grads_agree(t, "causal", std::nullopt, grad_tol(bfloat16)));
  Qkv many = random_qkv(2, 4500, 4500, 3, 5, 64, 64, float16);
  EXPECT_TRUE(grads_agree(many, "", std::nullopt, grad_tol(float16)));
  // The statistics pre-pass over many key tiles with a causal diagonal
  // crossing the forward's warps (Lk - Lq = 937).
  for (int d : {64, 128}) {
    Qkv long_keys = random_qkv(1, 2, 1, 150, 1087, d, d, float16);
    EXPECT_TRUE(
        grads_agree(long_keys, "causal", std::nullopt, grad_tol(float16)))
        << "d=" << d;
  }
}

BOTH_PATHS_TEST(FlashGradientsAccumulateOverHeadsAndQueryTiles) {
  // The backward keeps each warp's dK and dV in registers across every
  // (query head, query tile) of its kv head: 8 query heads per kv head and
  // 4 query tiles each (the last one partly padded, its second 32-query
  // chunk empty), causal diagonals crossing every 16-key strip of a tile,
  // and key tiles partly padded.
  for (Dtype dt : {float16, bfloat16}) {
    for (int d : {64, 128}) {
      Qkv t = random_qkv(2, 16, 2, 211, 147, d, d, dt);
      for (const char* mode : {"", "causal"}) {
        EXPECT_TRUE(grads_agree(t, mode, std::nullopt, grad_tol(dt)))
            << dtype_name(dt) << " d=" << d << " mode '" << mode << "'";
      }
    }
  }
}

BOTH_PATHS_TEST(FlashGradientsOfGradients) {
  // The fused backward's own vjp differentiates the graph's vjp: second
  // order (a Hessian-vector product), with grouped heads and an additive
  // mask.
  for (Dtype dt : {float16, bfloat16}) {
    Qkv t = random_qkv(1, 4, 2, 20, 30, 64, 64, dt);
    array mask = random_array({1, 1, 20, 30}, dt, -1, 1);
    array ct = random_array({1, 4, 20, 64}, dt, -1, 1);
    array wq = random_array({1, 4, 20, 64}, dt, -1, 1);
    array wv = random_array({1, 2, 30, 64}, dt, -1, 1);
    auto second = [&](Device d) {
      DefaultDeviceScope scope(d);
      bool fused_inside = false;
      Fn inner = [&](const std::vector<array>& in) {
        Fn attend = [&](const std::vector<array>& x) {
          return std::vector<array>{fast::scaled_dot_product_attention(
              x[0], x[1], x[2], 0.125f, "", mask)};
        };
        auto g = vjp(attend, {in[0], in[1], in[2]}, {ct}).second;
        fused_inside = graph_has<fast::ScaledDotProductAttentionVjp>(g);
        return std::vector<array>{
            add(sum(astype(multiply(g[0], wq), float32)),
                sum(astype(multiply(g[2], wv), float32)))};
      };
      auto g = vjp(inner, {t.q, t.k, t.v}, {array(1.0f)}).second;
      EXPECT_EQ(fused_inside, d == Device::gpu) << dtype_name(dt);
      eval(g);
      return g;
    };
    auto g = second(Device::gpu), c = second(Device::cpu);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(close_to_largest(g[i], c[i], 2 * grad_tol(dt)))
          << dtype_name(dt) << " input " << i;
    }
  }
}

TEST_F(GpuSdpa, GradientsOfShapesTheFusedBackwardLacks) {
  // Head dimension 96, mixed head dimensions, float32: the op builds the
  // graph under vjp; sinks and force_fused: the fused forward primitive,
  // whose vjp differentiates the graph. All match the CPU.
  for (auto [dt, d, dv] : {std::tuple{bfloat16, 96, 96},
                           std::tuple{float16, 64, 128},
                           std::tuple{float32, 64, 64}}) {
    Qkv t = random_qkv(1, 4, 2, 70, 90, d, dv, dt);
    EXPECT_TRUE(grads_agree(t, "causal", std::nullopt, grad_tol(dt),
                            std::nullopt, false))
        << dtype_name(dt) << " d=" << d << " dv=" << dv;
  }
  Qkv t = random_qkv(1, 4, 2, 9, 90, 64, 64, bfloat16);
  array sinks = random_array({4}, bfloat16, -1, 1);
  array ct = random_array({1, 4, 9, 64}, bfloat16, -1, 1);
  for (bool fused : {false, true}) {
    auto f = [&](const std::vector<array>& v, Device d) {
      DefaultDeviceScope scope(d);
      Fn fun = [&](const std::vector<array>& in) {
        return std::vector<array>{fast::scaled_dot_product_attention(
            in[0], in[1], in[2], 0.125f, "causal", std::nullopt, sinks,
            fused)};
      };
      auto grads = vjp(fun, {v[0], v[1], v[2]}, {ct}).second;
      EXPECT_FALSE(graph_has<fast::ScaledDotProductAttentionVjp>(grads));
      return concatenate({flatten(grads[0]), flatten(grads[1]),
                          flatten(grads[2])});
    };
    EXPECT_TRUE(same_on_devices(f, {t.q, t.k, t.v}, 4 * sdpa_tol(bfloat16)))
        << "sinks, force_fused " << fused;
  }
}

#if KILN_HAS_CUDA
// Where cuDNN is present, the tensor-core shapes without a mask run on it,
// forward and backward (its counters move) and agree with the CPU; a mask,
// few query rows (decoding) and more queries than keys under the causal
// rule stay on kiln's kernels (the counters stay).
TEST_F(GpuSdpa, CudnnPath) {
  if (!cuda::cudnn_attention_available()) GTEST_SKIP() << "no cuDNN";
  for (Dtype dt : {float16, bfloat16}) {
    Qkv t = random_qkv(2, 4, 2, 128, 192, 64, 64, dt);
    auto before = cuda::cudnn_attention_counts();
    EXPECT_TRUE(attention_agrees(t, "causal", std::nullopt, std::nullopt,
                                 sdpa_tol(dt)))
        << dtype_name(dt);
    auto forward = cuda::cudnn_attention_counts();
    EXPECT_GT(forward.forward, before.forward) << dtype_name(dt);
    EXPECT_TRUE(grads_agree(t, "causal", std::nullopt, grad_tol(dt)))
        << dtype_name(dt);
    // One forward, which keeps its statistics, and one backward: the
    // backward does not run the forward again.
    auto backward = cuda::cudnn_attention_counts();
    EXPECT_EQ(backward.forward - forward.forward, 1) << dtype_name(dt);
    EXPECT_EQ(backward.backward - forward.backward, 1) << dtype_name(dt);

    array mask = random_array({1, 1, 128, 192}, dt, -1, 1);
    EXPECT_TRUE(attention_agrees(t, "", mask, std::nullopt, sdpa_tol(dt)));
    EXPECT_TRUE(grads_agree(t, "", mask, grad_tol(dt)));
    Qkv decode = random_qkv(2, 4, 2, 16, 192, 64, 64, dt);
    EXPECT_TRUE(agrees_plain_and_causal(decode, sdpa_tol(dt)));
    Qkv longer_q = random_qkv(2, 4, 2, 192, 128, 64, 64, dt);
    EXPECT_TRUE(attention_agrees(longer_q, "causal", std::nullopt,
                                 std::nullopt, sdpa_tol(dt)));
    EXPECT_TRUE(grads_agree(longer_q, "causal", std::nullopt, grad_tol(dt)));
    auto after = cuda::cudnn_attention_counts();
    EXPECT_EQ(after.forward, backward.forward) << dtype_name(dt);
    EXPECT_EQ(after.backward, backward.backward) << dtype_name(dt);
  }
}

// The statistics a forward keeps under vjp where cuDNN runs the backward:
// each query row's log-sum-exp of its scaled scores (float32), written by
// cuDNN, or by kiln's kernel when cuDNN is off by the time it runs (the
// gradients then come from kiln's backward), against the CPU's logsumexp.
TEST_F(GpuSdpa, KeptStatistics) {
  if (!cuda::cudnn_attention_available()) GTEST_SKIP() << "no cuDNN";
  DefaultDeviceScope scope(Device::gpu);
  for (bool on_cudnn : {true, false}) {
    for (Dtype dt : {float16, bfloat16}) {
      for (auto [lq, lk, mode] : {std::tuple{96, 160, "causal"},
                                  std::tuple{130, 130, ""},
                                  std::tuple{64, 300, "causal"}}) {
        Qkv t = random_qkv(2, 3, 3, lq, lk, 64, 64, dt);
        array ct = random_array({2, 3, lq, 64}, dt, -1, 1);
        float scale = 0.125f;
        std::optional<array> out;
        Fn fun = [&](const std::vector<array>& in) {
          out = fast::scaled_dot_product_attention(in[0], in[1], in[2], scale,
                                                   mode);
          return std::vector<array>{*out};
        };
        auto grads = vjp(fun, {t.q, t.k, t.v}, {ct}).second;
        auto kept = out->outputs();
        ASSERT_EQ(kept.size(), 2u) << "no statistics kept";
        bool was = cuda::set_cudnn_attention_enabled(on_cudnn);
        eval(kept);
        eval(grads);
        cuda::set_cudnn_attention_enabled(was);

        auto q = multiply(astype(t.q, float32, Device::cpu), array(scale),
                          Device::cpu);
        auto k = astype(t.k, float32, Device::cpu);
        auto scores = matmul(q, swapaxes(k, -1, -2, Device::cpu), Device::cpu);
        if (std::string(mode) == "causal") {
          auto qi = expand_dims(arange(lk - lq, lk, 1, Device::cpu), 1,
                                Device::cpu);
          auto ki = expand_dims(arange(0, lk, 1, Device::cpu), 0,
                                Device::cpu);
          scores = where(greater_equal(qi, ki, Device::cpu), scores,
                         array(-std::numeric_limits<float>::infinity()),
                         Device::cpu);
        }
        auto want = logsumexp(scores, -1, false, Device::cpu);
        EXPECT_EQ(kept[1].dtype(), float32);
        EXPECT_TRUE(all_close(to_doubles(kept[1]), to_doubles(want), 2e-3,
                              2e-3))
            << (on_cudnn ? "cuDNN " : "kiln's kernel ") << dtype_name(dt)
            << " lq=" << lq << " lk=" << lk << " mode '" << mode << "'";
        auto cpu = sdpa_grads(t, ct, mode, std::nullopt, Device::cpu);
        const char* names[] = {"dq", "dk", "dv"};
        for (int i = 0; i < 3; ++i) {
          EXPECT_TRUE(close_to_largest(grads[i], cpu[i], grad_tol(dt)))
              << names[i] << (on_cudnn ? " cuDNN " : " kiln's kernel ")
              << dtype_name(dt) << " lq=" << lq << " lk=" << lk;
        }
      }
    }
  }
}

// grad of vmap: vmap's rule keeps the form that keeps statistics (the
// mapped axis folded into the batch), so the backward is still cuDNN's
// backward alone, and the gradients match each batch element's own.
TEST_F(GpuSdpa, KeptStatisticsUnderVmap) {
  if (!cuda::cudnn_attention_available()) GTEST_SKIP() << "no cuDNN";
  DefaultDeviceScope scope(Device::gpu);
  for (Dtype dt : {float16, bfloat16}) {
    // q mapped along its axis 1, k and v along axis 0; n = 3 elements.
    array q = random_array({2, 3, 4, 128, 64}, dt, -1, 1);
    array k = random_array({3, 2, 2, 192, 64}, dt, -1, 1);
    array v = random_array({3, 2, 2, 192, 64}, dt, -2, 2);
    array ct = random_array({3, 2, 4, 128, 64}, dt, -1, 1);
    float scale = 0.125f;
    Fn attend = [&](const std::vector<array>& in) {
      return std::vector<array>{fast::scaled_dot_product_attention(
          in[0], in[1], in[2], scale, "causal")};
    };
    Fn mapped = vmap(attend, {1, 0, 0});
    auto before = cuda::cudnn_attention_counts();
    auto grads = vjp(mapped, {q, k, v}, {ct}).second;
    eval(grads);
    auto after = cuda::cudnn_attention_counts();
    EXPECT_EQ(after.forward - before.forward, 1) << dtype_name(dt);
    EXPECT_EQ(after.backward - before.backward, 1) << dtype_name(dt);
    const char* names[] = {"dq", "dk", "dv"};
    int axis[] = {1, 0, 0};
    for (int i = 0; i < 3; ++i) {
      Qkv one = {take(q, i, 1), take(k, i, 0), take(v, i, 0)};
      auto cpu = sdpa_grads(one, take(ct, i, 0), "causal", std::nullopt,
                            Device::cpu);
      for (int g = 0; g < 3; ++g) {
        EXPECT_TRUE(
            close_to_largest(take(grads[g], i, axis[g]), cpu[g], grad_tol(dt)))
            << names[g] << " of element " << i << " " << dtype_name(dt);
      }
    }
  }
}

#endif // KILN_HAS_CUDA

} // namespace
} // namespace kiln::test
