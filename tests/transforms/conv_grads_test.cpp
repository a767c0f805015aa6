// vjp / jvp / vmap rules of Convolution (conv1d/2d, transposed convolutions
// and conv_general) with strides, padding, dilation, groups and flips.
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

array rnd(const Shape& s, double lo = -1.0, double hi = 1.0) {
  return random_array(s, float64, lo, hi);
}

using ConvFn = std::function<array(const array&, const array&)>;

ArrayFn two(ConvFn f) {
  return [f](const std::vector<array>& in) { return f(in[0], in[1]); };
}

TEST(GradConv, Conv1d) {
  struct Case {
    const char* name;
    int stride, padding, dilation, groups;
    Shape x, w;
  };
  std::vector<Case> cases = {
      {"plain", 1, 0, 1, 1, {2, 7, 3}, {4, 3, 3}},
      {"stride 2", 2, 0, 1, 1, {2, 8, 3}, {2, 3, 3}},
      {"stride 3, unused tail", 3, 0, 1, 1, {1, 9, 2}, {2, 2, 2}},
      {"padding 2", 1, 2, 1, 1, {2, 5, 2}, {3, 3, 2}},
      {"padding beyond kernel", 1, 3, 1, 1, {1, 4, 2}, {2, 2, 2}},
      {"dilation 2", 1, 1, 2, 1, {2, 9, 2}, {3, 3, 2}},
      {"groups 2", 1, 1, 1, 2, {2, 6, 4}, {6, 3, 2}},
      {"depthwise", 1, 0, 1, 3, {1, 6, 3}, {3, 2, 1}},
      {"all", 2, 1, 2, 2, {2, 11, 4}, {4, 3, 2}},
      {"1x1", 1, 0, 1, 1, {3, 4, 5}, {2, 1, 5}},
  };
  for (auto& c : cases) {
    check_transforms(
        std::string("conv1d ") + c.name, two([c](auto& x, auto& w) {
          return conv1d(x, w, c.stride, c.padding, c.dilation, c.groups);
        }),
        {rnd(c.x), rnd(c.w)});
  }
}

TEST(GradConv, Conv2d) {
  auto f = [](std::pair<int, int> st, std::pair<int, int> pad,
              std::pair<int, int> dil, int groups) {
    return two(
        [=](auto& x, auto& w) { return conv2d(x, w, st, pad, dil, groups); });
  };
  check_transforms("conv2d plain", f({1, 1}, {0, 0}, {1, 1}, 1),
                   {rnd({2, 5, 4, 3}), rnd({2, 3, 2, 3})});
  check_transforms("conv2d stride/padding", f({2, 1}, {1, 2}, {1, 1}, 1),
                   {rnd({1, 6, 5, 2}), rnd({3, 3, 3, 2})});
  check_transforms("conv2d dilation", f({1, 2}, {0, 1}, {2, 1}, 1),
                   {rnd({1, 7, 6, 2}), rnd({2, 2, 3, 2})});
  check_transforms("conv2d groups", f({1, 1}, {1, 1}, {1, 1}, 2),
                   {rnd({2, 4, 4, 4}), rnd({4, 3, 3, 2})});
  check_transforms("conv2d all", f({2, 2}, {1, 0}, {1, 2}, 2),
                   {rnd({1, 7, 8, 4}), rnd({6, 2, 3, 2})});
}

TEST(GradConv, Transposed) {
  check_transforms("conv_transpose1d",
                   two([](auto& x, auto& w) { return conv_transpose1d(x, w); }),
                   {rnd({2, 4, 3}), rnd({2, 3, 3})});
  check_transforms(
      "conv_transpose1d stride/padding/output padding",
      two([](auto& x, auto& w) { return conv_transpose1d(x, w, 2, 1, 1, 1); }),
      {rnd({2, 4, 2}), rnd({3, 3, 2})});
  check_transforms("conv_transpose1d dilation groups",
                   two([](auto& x, auto& w) {
                     return conv_transpose1d(x, w, 3, 2, 2, 0, 2);
                   }),
                   {rnd({1, 4, 4}), rnd({4, 3, 2})});
  check_transforms(
      "conv_transpose2d", two([](auto& x, auto& w) {
        return conv_transpose2d(x, w, {2, 1}, {1, 0}, {1, 2}, {1, 0});
      }),
      {rnd({1, 3, 4, 2}), rnd({3, 3, 2, 2})});
  check_transforms(
      "conv_transpose2d groups", two([](auto& x, auto& w) {
        return conv_transpose2d(x, w, {2, 2}, {0, 1}, {1, 1}, {0, 0}, 2);
      }),
      {rnd({2, 3, 3, 4}), rnd({2, 2, 3, 2})});
}

TEST(GradConv, GeneralInputDilationFlipAsymmetricPadding) {
  check_transforms("conv_general", two([](auto& x, auto& w) {
                     return conv_general(x, w, {2}, {1}, {3}, {2}, {3}, 1,
                                         true);
                   }),
                   {rnd({2, 4, 3}), rnd({2, 3, 3})});
  check_transforms("conv_general 2d", two([](auto& x, auto& w) {
                     return conv_general(x, w, {1, 2}, {0, 2}, {1, 0}, {1, 1},
                                         {2, 1}, 2, false);
                   }),
                   {rnd({1, 3, 5, 4}), rnd({4, 2, 2, 2})});
  check_transforms("conv_general 3d", two([](auto& x, auto& w) {
                     return conv_general(x, w, {1, 2, 1}, {1, 0, 0}, {0, 1, 0},
                                         {1, 1, 2}, {1, 2, 1}, 1, true);
                   }),
                   {rnd({1, 3, 3, 5, 2}), rnd({2, 2, 2, 2, 2})});
}

TEST(GradConv, NonContiguousInputs) {
  auto f = two([](auto& x, auto& w) { return conv1d(x, w, 2, 1, 1, 2); });
  check_transforms(
      "transposed layouts", f,
      {as_transposed(rnd({2, 7, 4})), as_transposed(rnd({4, 3, 2}))});
  // a kernel broadcast over output channels and a sliced input
  auto x =
      slice(rnd({2, 14, 4}), Shape{0, 0, 0}, Shape{2, 14, 4}, Shape{1, 2, 1});
  check_transforms("broadcast weight, sliced input", f,
                   {x, broadcast_to(rnd({1, 3, 2}), {4, 3, 2})});
}

TEST(GradConv, MatchesHandWrittenLoops) {
  // conv1d stride 2, padding 1, dilation 2: out[n,o,c] =
  // sum_{k,i} xpad[n, 2 o + 2 k, i] w[c,k,i]; gradients by float64 loops.
  int n = 2, l = 7, ci = 3, co = 2, k = 2, s = 2, p = 1, d = 2;
  auto x = rnd({n, l, ci}), w = rnd({co, k, ci});
  auto y = conv1d(x, w, s, p, d);
  int o = y.shape(1);
  auto cot = rnd(y.shape());
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) {
        return std::vector<array>{conv1d(in[0], in[1], s, p, d)};
      },
      {x, w}, {cot});
  auto xv = to_doubles(x), wv = to_doubles(w), cv = to_doubles(cot);
  std::vector<double> gx(xv.size(), 0), gw(wv.size(), 0);
  for (int b = 0; b < n; ++b)
    for (int t = 0; t < o; ++t)
      for (int c = 0; c < co; ++c)
        for (int kk = 0; kk < k; ++kk)
          for (int i = 0; i < ci; ++i) {
            int pos = t * s + kk * d - p;
            if (pos < 0 || pos >= l) continue;
            double g = cv[(b * o + t) * co + c];
            gx[(b * l + pos) * ci + i] += g * wv[(c * k + kk) * ci + i];
            gw[(c * k + kk) * ci + i] += g * xv[(b * l + pos) * ci + i];
          }
  EXPECT_TRUE(all_close(to_doubles(grads[0]), gx, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(to_doubles(grads[1]), gw, 1e-12, 1e-12));
}

TEST(GradConv, VmapEachOperand) {
  for (int groups : {1, 2}) {
    auto f = two([groups](auto& x, auto& w) {
      return conv2d(x, w, {2, 1}, {1, 0}, {1, 1}, groups);
    });
    int cg = 4 / groups;
    auto x = rnd({2, 5, 4, 4}), w = rnd({4, 3, 2, cg});
    std::string g = " groups " + std::to_string(groups);
    EXPECT_TRUE(check_vmap(f, {rnd({3, 2, 5, 4, 4}), w}, {0, -1})) << g;
    EXPECT_TRUE(check_vmap(f, {x, rnd({4, 3, 2, cg, 3})}, {-1, 4})) << g;
    EXPECT_TRUE(
        check_vmap(f, {rnd({2, 5, 3, 4, 4}), rnd({4, 3, 3, 2, cg})}, {2, 1}))
        << g;
  }
  auto t = two(
      [](auto& x, auto& w) { return conv_transpose1d(x, w, 2, 1, 1, 1, 2); });
  EXPECT_TRUE(check_vmap(t, {rnd({2, 4, 4}), rnd({3, 4, 3, 2})}, {-1, 0}));
  EXPECT_TRUE(check_vmap(t, {rnd({2, 3, 4, 4}), rnd({3, 4, 3, 2})}, {1, 0}));
}

TEST(GradConv, Compositions) {
  // grad of grad along the weight path, and along the input with the
  // weight held constant
  auto loss = [](const array& x, const array& w) {
    return sum(square(conv1d(x, w, 2, 1, 1, 2)));
  };
  auto gw = [&](const std::vector<array>& in) {
    return grad([&](const std::vector<array>& v) { return loss(v[0], v[1]); },
                1)(in)[0];
  };
  check_transforms("grad_w of conv1d", gw, {rnd({2, 7, 4}), rnd({4, 3, 2})});
  auto w = rnd({4, 3, 2});
  auto gx = [&](const std::vector<array>& in) {
    return grad([&](const array& v) { return loss(v, w); })(in[0]);
  };
  check_transforms("grad_x of conv1d", gx, {rnd({2, 7, 4})});
  // vmap of grad: per-example weight gradients
  auto per_example = vmap(
      [&](const std::vector<array>& in) {
        return std::vector<array>{gw({expand_dims(in[0], 0), in[1]})};
      },
      {0, -1});
  auto xs = rnd({3, 7, 4});
  auto got = per_example({xs, w})[0];
  for (int b = 0; b < 3; ++b) {
    auto want = gw({slice(xs, Shape{b, 0, 0}, Shape{b + 1, 7, 4}), w});
    EXPECT_TRUE(
        all_close(to_doubles(take(got, b, 0)), to_doubles(want), 1e-12, 1e-12));
  }
}

// The weight's gradient is one ConvolutionWeightGrad node on the forward's
// input and the cotangent as they are; its own transformations (those of
// its fallback graph) hold for grouped, strided, dilated, flipped and
// asymmetrically padded convolutions in 1 to 3 dimensions.
TEST(GradConv, WeightGradientNode) {
  auto x = rnd({2, 9, 8, 4}), w = rnd({6, 3, 2, 2});
  auto conv = [](const array& x, const array& w) {
    return conv_general(x, w, {2, 1}, {1, 0}, {0, 1}, {1, 2}, {1, 1}, 2,
                        true);
  };
  auto cot = rnd(conv(x, w).shape());
  auto of_w = [&](const std::vector<array>& v) {
    return std::vector<array>{conv(x, v[0])};
  };
  auto dw = vjp(of_w, {w}, {cot}).second[0];
  ASSERT_TRUE(dw.has_primitive());
  EXPECT_STREQ(dw.primitive().name(), "ConvolutionWeightGrad");
  ASSERT_EQ(dw.inputs().size(), 2u);
  EXPECT_EQ(dw.inputs()[0].id(), x.id());
  EXPECT_EQ(dw.inputs()[1].id(), cot.id());
  EXPECT_EQ(dw.shape(), w.shape());
  struct Case {
    const char* name;
    std::function<array(const array&, const array&)> conv;
    Shape x, w;
  };
  std::vector<Case> cases = {
      {"grouped conv2d, flipped, stride and dilation", conv, {2, 9, 8, 4},
       {6, 3, 2, 2}},
      {"depthwise conv1d, stride 2, padding 1",
       [](auto& x, auto& w) { return conv1d(x, w, 2, 1, 1, 3); },
       {2, 9, 3},
       {3, 3, 1}},
      {"conv3d, input dilation, asymmetric padding",
       [](auto& x, auto& w) {
         return conv_general(x, w, {1, 2, 1}, {1, 0, 0}, {0, 1, 0}, {1, 1, 2},
                             {1, 2, 1}, 1, true);
       },
       {1, 3, 3, 5, 2},
       {2, 2, 2, 2, 2}},
  };
  for (const auto& c : cases) {
    auto y_shape = c.conv(rnd(c.x), rnd(c.w)).shape();
    // The weight gradient as a function of x and the cotangent (at any
    // weight: the convolution is linear in it).
    auto wgrad = [c, w0 = rnd(c.w)](const std::vector<array>& v) {
      auto of_w = [&](const std::vector<array>& p) {
        return std::vector<array>{c.conv(v[0], p[0])};
      };
      return vjp(of_w, {w0}, {v[1]}).second[0];
    };
    check_transforms(std::string("weight gradient of ") + c.name, wgrad,
                     {rnd(c.x), rnd(y_shape)});
  }
}

TEST(GradConv, DtypesAndEmptyBatch) {
  auto f = [](const std::vector<array>& in) {
    return sum(sin(conv2d(in[0], in[1], {1, 2}, {1, 1})));
  };
  auto x = rnd({2, 4, 5, 3}), w = rnd({2, 3, 3, 3});
  auto ref = grad(f, std::vector<int>{0, 1})({x, w});
  for (Dtype dt : {float32, float16, bfloat16}) {
    auto g = grad(f, std::vector<int>{0, 1})({astype(x, dt), astype(w, dt)});
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(g[i].dtype(), dt);
      EXPECT_TRUE(all_close(to_doubles(g[i]), to_doubles(ref[i]),
                            16 * tolerance(dt), 16 * tolerance(dt)))
          << dtype_name(dt) << " input " << i;
    }
  }
  // an empty batch: empty input gradient, zero weight gradient
  auto g0 = grad(f, std::vector<int>{0, 1})({rnd({0, 4, 5, 3}), w});
  EXPECT_EQ(g0[0].shape(), (Shape{0, 4, 5, 3}));
  EXPECT_EQ(to_doubles(g0[1]), std::vector<double>(w.size(), 0.0));
}

} // namespace
} // namespace kiln::test
