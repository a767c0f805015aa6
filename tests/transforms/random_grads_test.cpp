// Transformation rules of the random primitives: no gradient through keys,
// gradients through the samplers' parameters, vmap over keys equal to the
// loop over them, and the permutation's gradient.
#include <cmath>
#include <numbers>

#include "kiln/ops/utils.h"
#include "kiln/primitives/random.h"
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

using Fun = std::function<array(const array&)>;

// fun mapped over the rows of keys (in_axis) against the stacked loop.
::testing::AssertionResult vmap_matches_loop(const Fun& fun, const array& keys,
                                             int in_axis = 0) {
  auto got = vmap(fun, in_axis)(keys);
  std::vector<array> rows;
  for (int b = 0; b < keys.shape(in_axis); ++b) {
    rows.push_back(fun(take(keys, b, in_axis)));
  }
  auto want = stack(rows, 0);
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "vmap " << detail::describe(got) << " vs loop "
           << detail::describe(want);
  }
  return all_close(to_doubles(got), to_doubles(want), 0, 0);
}

TEST(GradRandom, VmapOverKeysEqualsLoop) {
  auto keys = random::split(random::key(3), 3);
  std::vector<std::pair<const char*, Fun>> cases = {
      {"bits4",
       [](auto& k) {
         return random::bits({2, 3}, 4, k);
       }},
      // odd byte counts: a middle word and a partial last word
      {"bits1", [](auto& k) { return random::bits({5}, 1, k); }},
      {"bits2",
       [](auto& k) {
         return random::bits({3, 3}, 2, k);
       }},
      {"uniform",
       [](auto& k) {
         return random::uniform({2, 3}, float32, k);
       }},
      {"normal",
       [](auto& k) { return random::normal({7}, float32, 0.0f, 1.0f, k); }},
      {"split", [](auto& k) { return random::split(k, 3); }},
      {"split_pair", [](auto& k) { return random::split(k).second; }},
      {"randint",
       [](auto& k) { return random::randint(0, 10, {4}, int32, k); }},
      {"bernoulli", [](auto& k) { return random::bernoulli(0.3f, {6}, k); }},
      {"permutation", [](auto& k) { return random::permutation(6, k); }},
      {"categorical",
       [](auto& k) {
         return random::categorical(array({0.1f, 1.0f, -0.5f}), -1, 5, k);
       }},
      {"empty",
       [](auto& k) {
         return random::uniform({0, 3}, float32, k);
       }},
  };
  for (auto& [name, f] : cases) {
    EXPECT_TRUE(vmap_matches_loop(f, keys)) << name;
    // keys mapped along their last axis (a transposed, strided key array)
    EXPECT_TRUE(vmap_matches_loop(f, transpose(keys), 1)) << name << " axis 1";
  }
  // the same key broadcast to every batch element (stride 0) draws alike
  auto same = broadcast_to(random::key(5), {4, 2});
  auto u =
      vmap(Fun([](auto& k) { return random::uniform({3}, float32, k); }))(same);
  auto rows = to_doubles(u);
  auto one = to_doubles(random::uniform({3}, float32, random::key(5)));
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(
        std::vector<double>(rows.begin() + 3 * b, rows.begin() + 3 * b + 3),
        one);
  }
}

TEST(GradRandom, VmapOverKeysMatchesMLX) {
  // mx.vmap(lambda k: mx.random.randint(0, 256, (5,), dtype=mx.uint8, key=k))
  //     (mx.random.split(mx.random.key(3), 3)), from MLX.
  auto got = vmap(Fun([](auto& k) {
    return random::randint(0, 256, {5}, uint8, k);
  }))(random::split(random::key(3), 3));
  std::vector<double> mlx = {113, 49,  79,  194, 246, 171, 137, 127,
                             152, 181, 223, 85,  202, 255, 28};
  EXPECT_EQ(to_doubles(got), mlx);
}

TEST(GradRandom, NestedVmapOverKeys) {
  auto keys = reshape(random::split(random::key(11), 6), {2, 3, 2});
  Fun draw = [](auto& k) { return random::normal({4}, float32, 0, 1, k); };
  auto got = vmap(vmap(draw))(keys);
  ASSERT_EQ(got.shape(), (Shape{2, 3, 4}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      auto row = to_doubles(draw(take(take(keys, i, 0), j, 0)));
      want.insert(want.end(), row.begin(), row.end());
    }
  }
  EXPECT_EQ(to_doubles(got), want);
}

TEST(GradRandom, KeysCarryNoGradient) {
  auto key = random::key(4);
  auto x = random_array({2, 3}, float32);
  auto fn = [](const std::vector<array>& in) {
    auto u = random::uniform({2, 3}, float32, in[0]);
    auto p = random::permutation(in[1], 1, in[0]);
    return std::vector<array>{add(multiply(u, in[1]), p)};
  };
  // vjp with the key as a primal: a zero cotangent for it, no error
  auto cot = random_array({2, 3}, float32);
  auto [outs, grads] = vjp(fn, {key, x}, {cot});
  EXPECT_EQ(grads[0].dtype(), uint32);
  EXPECT_EQ(to_doubles(grads[0]), std::vector<double>(2, 0.0));
  // jvp: only x's tangent moves the output
  auto t = random_array({2, 3}, float32);
  auto tan = jvp(fn, {key, x}, {zeros_like(key), t}).second[0];
  auto want = add(multiply(random::uniform({2, 3}, float32, key), t),
                  random::permutation(t, 1, key));
  EXPECT_TRUE(all_close(to_doubles(tan), to_doubles(want), 1e-6, 1e-6));
  // only the key varies: the tangent is zero
  auto tk = jvp(fn, {key, x}, {ones_like(key), zeros_like(x)}).second[0];
  EXPECT_EQ(to_doubles(tk), std::vector<double>(6, 0.0));
  // grad of bits turned into floats is zero (as MLX)
  auto g = grad([](const array& v) {
    return sum(
        multiply(v, astype(random::bits({3}, 4, random::key(1)), float32)));
  })(array({1.0f, 2.0f, 3.0f}));
  auto b = to_doubles(random::bits({3}, 4, random::key(1)));
  EXPECT_TRUE(all_close(to_doubles(g), b, 1e-6, 0));
}

TEST(GradRandom, SamplerParameters) {
  auto key = random::key(21);
  check_transforms("uniform",
                   [&](const std::vector<array>& in) {
                     return random::uniform(in[0], in[1], {3, 4}, float64, key);
                   },
                   {random_array({4}, float64, -2, -1),
                    random_array({3, 1}, float64, 1, 2)});
  check_transforms("normal",
                   [&](const std::vector<array>& in) {
                     return random::normal({3, 4}, float64, in[0], in[1], key);
                   },
                   {random_array({3, 4}, float64),
                    as_transposed(random_array({3, 4}, float64))});
  check_transforms(
      "gumbel scaled",
      [&](const std::vector<array>& in) {
        return multiply(in[0], random::gumbel({2, 3}, float64, key));
      },
      {random_array({2, 3}, float64)});
}

// truncated_normal goes through Float32Erf (erf of the bounds, erfinv of the
// draw), which computes in float32: its gradient is checked against the
// analytic derivative instead of finite differences.
TEST(GradRandom, TruncatedNormalThroughFloat32Erf) {
  auto key = random::key(8);
  auto lo = random_array({5}, float64, -2, -0.5);
  auto hi = random_array({5}, float64, 0.5, 2);
  auto f = [&](const std::vector<array>& in) {
    return random::truncated_normal(in[0], in[1], {5}, float64, key);
  };
  auto c = random_array({5}, float64);
  auto grads = vjp(
                   [&](const std::vector<array>& in) {
                     return std::vector<array>{f(in)};
                   },
                   {lo, hi}, {c})
                   .second;
  // y = erfinv(a + (b - a) r) with a = erf(lo / sqrt2), b = erf(hi / sqrt2):
  // dy/dlo = erfinv'(u) (1 - r) erf'(lo / sqrt2) / sqrt2, and the sample is
  // sqrt2 y: d/dlo = (1 - r) exp(y^2 - lo^2 / 2), d/dhi = r exp(y^2 - hi^2 /
  // 2).
  auto r = to_doubles(random::uniform({5}, float64, key));
  auto y = to_doubles(f({lo, hi}));
  auto l = to_doubles(lo), h = to_doubles(hi), cs = to_doubles(c);
  std::vector<double> want_lo, want_hi;
  for (int i = 0; i < 5; ++i) {
    double yy = y[i] / std::sqrt(2.0);
    want_lo.push_back(cs[i] * (1 - r[i]) * std::exp(yy * yy - l[i] * l[i] / 2));
    want_hi.push_back(cs[i] * r[i] * std::exp(yy * yy - h[i] * h[i] / 2));
  }
  EXPECT_TRUE(all_close(to_doubles(grads[0]), want_lo, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(to_doubles(grads[1]), want_hi, 1e-4, 1e-5));
  EXPECT_TRUE(check_jvp(f, {lo, hi}));
  EXPECT_TRUE(check_vmap(f, {stack({lo, lo}), stack({hi, add(hi, array(0.1))})},
                         {0, 0}));
  // normal draws: the erfinv of a drawn uniform has no input to differentiate
  auto g = grad([&](const array& s) {
    return sum(random::normal({4}, float64, std::nullopt, s, key));
  })(array(2.0, float64));
  auto n = to_doubles(random::normal({4}, float64, 0.0f, 1.0f, key));
  EXPECT_NEAR(to_doubles(g)[0], n[0] + n[1] + n[2] + n[3], 1e-12);
}

// The primitive itself, which the samplers reach only in pairs (erf then
// erfinv), where a common error in both rules could cancel.
TEST(GradRandom, Float32ErfRules) {
  auto x = random_array({6}, float64, -0.9, 0.9);
  for (bool inverse : {false, true}) {
    auto f = [inverse](const array& v) {
      return array(v.shape(), v.dtype(),
                   std::make_shared<Float32Erf>(
                       default_stream(default_device()), inverse),
                   {v});
    };
    auto y = to_doubles(f(x)), xs = to_doubles(x);
    // d erf = 2/sqrt(pi) exp(-x^2); d erfinv = sqrt(pi)/2 exp(y^2);
    // second derivatives: -2x d erf and 2y (d erfinv)^2.
    std::vector<double> d1, d2;
    for (size_t i = 0; i < xs.size(); ++i) {
      double d =
          inverse ? std::sqrt(std::numbers::pi) / 2 * std::exp(y[i] * y[i])
                  : 2 / std::sqrt(std::numbers::pi) * std::exp(-xs[i] * xs[i]);
      d1.push_back(d);
      d2.push_back(inverse ? 2 * y[i] * d * d : -2 * xs[i] * d);
    }
    auto t = random_array({6}, float64);
    auto jt = jvp(f, x, t).second;
    EXPECT_TRUE(all_close(
        to_doubles(jt),
        map2(to_doubles(t), d1, [](double a, double b) { return a * b; }),
        1e-10, 1e-12))
        << inverse;
    auto g = grad([&](const array& v) { return sum(f(v)); })(x);
    EXPECT_TRUE(all_close(to_doubles(g), d1, 1e-10, 1e-12)) << inverse;
    auto g2 = grad([&](const array& v) {
      return sum(grad([&](const array& u) { return sum(f(u)); })(v));
    })(x);
    EXPECT_TRUE(all_close(to_doubles(g2), d2, 1e-5, 1e-6)) << inverse;
    auto xt = as_transposed(random_array({3, 4}, float64, -0.9, 0.9));
    EXPECT_TRUE(check_vmap([&](auto& in) { return f(in[0]); }, {xt}, {1}, 0));
    auto df = [&](const std::vector<array>& in) {
      return grad([&](const array& u) { return sum(f(u)); })(in[0]);
    };
    EXPECT_TRUE(check_vmap(df, {xt}, {0}, 0));
  }
}

TEST(GradRandom, Permutation) {
  auto key = random::key(2);
  for (int axis : {0, 1, -1}) {
    auto f = [&](const std::vector<array>& in) {
      return random::permutation(in[0], axis, key);
    };
    auto x = random_array({4, 5}, float64);
    check_transforms("permutation", f, {x});
    check_transforms("permutation transposed", f, {as_transposed(x)});
    check_transforms("permutation broadcast", f,
                     {broadcast_to(random_array({5}, float64), {4, 5})});
  }
  // the gradient is the cotangent sent back through the inverse permutation
  auto x = random_array({6}, float64);
  auto c = random_array({6}, float64);
  auto g =
      vjp([&](const array& v) { return random::permutation(v, 0, key); }, x, c)
          .second;
  auto p = to_doubles(random::permutation(6, key));
  auto cs = to_doubles(c), gs = to_doubles(g);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(gs[static_cast<int>(p[i])], cs[i]);
  // grad of grad: d2/dx2 of sum(perm(x)^3) is 6x
  auto g2 = grad([&](const array& v) {
    return sum(grad([&](const array& w) {
      return sum(power(random::permutation(w, 0, key), array(3.0)));
    })(v));
  })(x);
  EXPECT_TRUE(all_close(to_doubles(g2),
                        map1(to_doubles(x), [](double v) { return 6 * v; }),
                        1e-12, 1e-12));
  // zero-size
  auto e = grad([&](const array& v) {
    return sum(random::permutation(v, 1, key));
  })(zeros({2, 0}, float32));
  EXPECT_EQ(e.shape(), (Shape{2, 0}));
}

TEST(GradRandom, PermutationVmapOverKeysAndValues) {
  auto keys = random::split(random::key(9), 3);
  auto xs = random_array({3, 4, 5}, float32);
  for (int axis : {0, 1}) {
    auto f = [axis](const std::vector<array>& in) {
      return random::permutation(in[1], axis, in[0]);
    };
    EXPECT_TRUE(check_vmap(f, {keys, xs}, {0, 0}, 0)) << axis;
    EXPECT_TRUE(check_vmap(f, {keys, take(xs, 0, 0)}, {0, -1}, 0)) << axis;
    EXPECT_TRUE(check_vmap(f, {transpose(keys), moveaxis(xs, 0, 2)}, {1, 2}, 0))
        << axis;
  }
}

} // namespace
} // namespace kiln::test
