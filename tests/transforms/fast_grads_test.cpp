// Transformation rules of the fast primitives (layer_norm, rms_norm, rope,
// scaled_dot_product_attention): finite differences, the jvp/vjp identity
// and vmap for every differentiable input, masks, non-contiguous inputs and
// second-order compositions.
#include <cmath>

#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

using Fun = std::function<array(const std::vector<array>&)>;

array rnd(const Shape& s, double lo = -1.5, double hi = 1.5) {
  return random_array(s, float64, lo, hi);
}

// The gradient of sum(w * f(x)) with respect to the first input.
Fun grad_of(const Fun& f, const array& w) {
  return [f, w](const std::vector<array>& in) {
    return grad([&](const std::vector<array>& x) {
      return sum(multiply(f(x), w));
    })(in)[0];
  };
}

TEST(GradFast, LayerNorm) {
  Fun full = [](auto& in) {
    return fast::layer_norm(in[0], in[1], in[2], 1e-5f);
  };
  auto x = rnd({2, 3, 6}), w = rnd({6}), b = rnd({6});
  check_transforms("layer_norm", full, {x, w, b});
  check_transforms("layer_norm transposed", full,
                   {as_transposed(x), w, as_transposed(b)});
  check_transforms("layer_norm broadcast", full,
                   {broadcast_to(rnd({6}), {4, 6}), w, b});
  check_transforms("layer_norm weight only",
                   [](auto& in) {
                     return fast::layer_norm(in[0], in[1], std::nullopt, 1e-5f);
                   },
                   {x, w});
  check_transforms("layer_norm bias only",
                   [](auto& in) {
                     return fast::layer_norm(in[0], std::nullopt, in[1], 1e-5f);
                   },
                   {x, b});
  check_transforms("layer_norm plain",
                   [](auto& in) {
                     return fast::layer_norm(in[0], std::nullopt, std::nullopt,
                                             1e-5f);
                   },
                   {rnd({5, 4})});
  check_transforms("layer_norm grad", grad_of(full, rnd({2, 3, 6})), {x, w, b});
  // only the parameters mapped: x is shared by the batch
  EXPECT_TRUE(check_vmap(full, {x, rnd({6, 3}), b}, {-1, 1, -1}));
  EXPECT_TRUE(check_vmap(full, {x, w, rnd({2, 6})}, {-1, -1, 0}));
}

TEST(GradFast, RMSNorm) {
  Fun full = [](auto& in) { return fast::rms_norm(in[0], in[1], 1e-5f); };
  auto x = rnd({3, 2, 5}), w = rnd({5});
  check_transforms("rms_norm", full, {x, w});
  check_transforms("rms_norm transposed", full, {as_transposed(x), w});
  check_transforms(
      "rms_norm plain",
      [](auto& in) { return fast::rms_norm(in[0], std::nullopt, 1e-5f); },
      {rnd({4, 3})});
  check_transforms("rms_norm grad", grad_of(full, rnd({3, 2, 5})), {x, w});
  EXPECT_TRUE(check_vmap(full, {x, rnd({4, 5})}, {-1, 0}));
}

TEST(GradFast, NormsInLowPrecision) {
  // float32 gradients agree with the float64 ones to float32 accuracy.
  auto x = rnd({4, 8}), w = rnd({8}), b = rnd({8}), c = rnd({4, 8});
  auto loss = [&](const std::vector<array>& in) {
    return sum(multiply(fast::layer_norm(in[0], in[1], in[2], 1e-5f),
                        astype(c, in[0].dtype())));
  };
  auto g64 = grad(loss, std::vector<int>{0, 1, 2})({x, w, b});
  auto g32 = grad(loss, std::vector<int>{0, 1, 2})(
      {astype(x, float32), astype(w, float32), astype(b, float32)});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(g32[i].dtype(), float32);
    EXPECT_TRUE(all_close(to_doubles(g32[i]), to_doubles(g64[i]), 1e-4, 1e-4))
        << i;
  }
}

TEST(GradFast, RoPE) {
  auto x = rnd({2, 3, 4, 8});
  for (bool traditional : {false, true}) {
    for (int dims : {8, 4}) {
      auto name = std::string("rope dims ") + std::to_string(dims) +
                  (traditional ? " traditional" : "");
      // offset as an input: a scalar, then one per batch entry
      Fun f = [=](auto& in) {
        return fast::rope(in[0], dims, traditional, 10000.0f, 0.7f, in[1]);
      };
      check_transforms(name, f, {x, array(3, int32)}, {1});
      check_transforms(name + " per-batch offset", f, {x, array({1, 5}, int32)},
                       {1});
      check_transforms(name + " transposed", f, {as_transposed(x), array(2)},
                       {1});
      check_transforms(name + " grad", grad_of(f, rnd({2, 3, 4, 8})),
                       {x, array({0, 2}, int32)}, {1});
      // only the offsets mapped: scalars, then one per batch entry
      EXPECT_TRUE(check_vmap(f, {x, array({0, 3, 7}, int32)}, {-1, 0}));
      EXPECT_TRUE(check_vmap(f, {x, array({0, 3, 7, 1, 2, 2}, {2, 3}, int32)},
                             {-1, 1}));
    }
  }
}

TEST(GradFast, RoPEFrequencies) {
  // A float32 freqs input: its gradient through the fallback against the
  // derivative of the rotation written out here (angles theta = p / f):
  // dy1/dtheta = -y2, dy2/dtheta = y1, dtheta/df = -p / f^2.
  int T = 3, D = 4, half = 2;
  float scale = 0.5f;
  auto x = rnd({1, 1, T, D});
  auto freqs = random_array({half}, float32, 1, 3);
  auto c = rnd({1, 1, T, D});
  Fun f = [&](auto& in) {
    return fast::rope(in[0], D, false, std::nullopt, scale, array(1), in[1]);
  };
  auto g = vjp(
               [&](const std::vector<array>& in) {
                 return std::vector<array>{f(in)};
               },
               {x, freqs}, {c})
               .second;
  EXPECT_EQ(g[1].dtype(), float32);
  auto y = to_doubles(f({x, freqs}));
  auto fs = to_doubles(freqs), cs = to_doubles(c);
  std::vector<double> want(half, 0.0);
  for (int t = 0; t < T; ++t) {
    double p = (t + 1) * static_cast<double>(scale);
    for (int j = 0; j < half; ++j) {
      int i1 = t * D + j, i2 = t * D + j + half;
      double dtheta = cs[i1] * -y[i2] + cs[i2] * y[i1];
      want[j] += dtheta * -p / (fs[j] * fs[j]);
    }
  }
  EXPECT_TRUE(all_close(to_doubles(g[1]), want, 1e-5, 1e-6));
  // x's rules with freqs held (skipped: it is rounded to float32), and vmap
  // with freqs mapped too
  check_transforms("rope freqs", f, {x, freqs}, {1});
}

TEST(GradFast, ScaledDotProductAttention) {
  // GQA: 4 query heads over 2 key/value heads.
  auto q = rnd({2, 4, 3, 4}), k = rnd({2, 2, 5, 4}), v = rnd({2, 2, 5, 3});
  const float scale = 0.6f;
  Fun plain = [=](auto& in) {
    return fast::scaled_dot_product_attention(in[0], in[1], in[2], scale);
  };
  check_transforms("sdpa", plain, {q, k, v});
  check_transforms(
      "sdpa non-contiguous", plain,
      {as_transposed(q), broadcast_to(rnd({1, 2, 5, 4}), {2, 2, 5, 4}),
       as_transposed(v)});
  Fun causal = [=](auto& in) {
    return fast::scaled_dot_product_attention(in[0], in[1], in[2], scale,
                                              "causal");
  };
  check_transforms("sdpa causal", causal, {q, k, v});
  // an additive mask is differentiable too
  Fun additive = [=](auto& in) {
    return fast::scaled_dot_product_attention(in[0], in[1], in[2], scale, "",
                                              in[3]);
  };
  check_transforms("sdpa additive mask", additive, {q, k, v, rnd({3, 5})});
  check_transforms("sdpa additive mask per head", additive,
                   {q, k, v, rnd({2, 4, 3, 5})});
  // a boolean mask (every row keeps its first key)
  auto keep =
      logical_or(random_array({2, 1, 3, 5}, bool_), equal(arange(5), array(0)));
  Fun boolean = [=](auto& in) {
    return fast::scaled_dot_product_attention(in[0], in[1], in[2], scale,
                                              "array", in[3]);
  };
  check_transforms("sdpa bool mask", boolean, {q, k, v, keep}, {3});
  // sinks: one extra logit per query head
  Fun sinks = [=](auto& in) {
    return fast::scaled_dot_product_attention(in[0], in[1], in[2], scale, "",
                                              std::nullopt, in[3]);
  };
  check_transforms("sdpa sinks", sinks, {q, k, v, rnd({4})});
  // only keys mapped, or only the mask
  EXPECT_TRUE(check_vmap(plain, {q, rnd({2, 2, 5, 3, 4}), v}, {-1, 3, -1}));
  EXPECT_TRUE(check_vmap(additive, {q, k, v, rnd({3, 5, 2})}, {-1, -1, -1, 2}));
  EXPECT_TRUE(check_vmap(boolean, {q, k, v, stack({keep, logical_not(keep)})},
                         {-1, -1, -1, 0}));
  // second order and vmap of grad, with respect to q
  check_transforms("sdpa grad", grad_of(causal, rnd({2, 4, 3, 3})), {q, k, v});
}

TEST(GradFast, ScaledDotProductAttentionMaskGradient) {
  // With one key the output is v whatever the scores: q, k and the mask get
  // zero gradients, and v the summed cotangent.
  auto q = rnd({1, 2, 3, 4}), k = rnd({1, 2, 1, 4}), v = rnd({1, 2, 1, 2});
  auto m = rnd({1, 2, 3, 1});
  auto c = rnd({1, 2, 3, 2});
  auto g = vjp(
               [](const std::vector<array>& in) {
                 return std::vector<array>{fast::scaled_dot_product_attention(
                     in[0], in[1], in[2], 1.0f, "", in[3])};
               },
               {q, k, v, m}, {c})
               .second;
  for (int i : {0, 1, 3}) {
    EXPECT_TRUE(all_close(to_doubles(g[i]),
                          std::vector<double>(g[i].size(), 0.0), 0, 1e-12))
        << i;
  }
  EXPECT_TRUE(
      all_close(to_doubles(g[2]), to_doubles(sum(c, 2, true)), 1e-12, 1e-12));
}

} // namespace
} // namespace kiln::test
