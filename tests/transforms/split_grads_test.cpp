// Transformations of split (one Split node): vjp against finite differences
// and float64 references, jvp, vmap over each axis, compile (CSE, shapeless),
// and the shape of the backward graph: one Concatenate, no SliceUpdate.
#include <iostream>
#include <map>
#include <set>

#include "kiln/core/primitive.h"
#include "kiln/transforms/graph_walk.h"
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

using Args = std::vector<array>;

array rnd(const Shape& s) { return random_array(s, float64, -1.5, 1.5); }

// Nodes of the lazy graph behind outputs, by primitive name (the outputs of
// a multi-output node count once).
std::map<std::string, int> node_counts(const std::vector<array>& outputs) {
  std::map<std::string, int> counts;
  std::set<const Primitive*> seen_nodes;
  std::set<uintptr_t> seen;
  detail::walk_graph(
      outputs,
      [&](const array& a) {
        return a.has_primitive() && seen.insert(a.id()).second;
      },
      [&](const array& a) {
        if (seen_nodes.insert(&a.primitive()).second) {
          ++counts[a.primitive().name()];
        }
      });
  return counts;
}

int total(const std::map<std::string, int>& counts) {
  int n = 0;
  for (auto& [name, c] : counts) n += c;
  return n;
}

TEST(GradSplit, MatchesFiniteDifferencesJvpAndVmap) {
  // Each axis, by count and at uneven indices, with a weight per piece so
  // every piece's cotangent differs.
  for (int axis = 0; axis < 3; ++axis) {
    check_transforms("split by count, axis " + std::to_string(axis),
                     [axis](const Args& in) {
                       auto p = split(in[0], 2, axis);
                       return add(multiply(p[0], p[1]), sin(p[1]));
                     },
                     {rnd({4, 2, 6})});
    check_transforms("split at indices, axis " + std::to_string(axis),
                     [axis](const Args& in) {
                       auto p = split(in[0], Shape{1, 3}, axis);
                       return add(sum(exp(p[0])),
                                  add(multiply(sum(p[1]), sum(square(p[2]))),
                                      sum(p[1])));
                     },
                     {as_transposed(rnd({4, 5, 6}))});
  }
}

TEST(GradSplit, UnusedRepeatedEmptyAndUnsortedPieces) {
  auto x = rnd({3, 8});
  // Only the middle piece is used (the others get zeros), and it is used
  // twice.
  check_transforms("middle piece only",
                   [](const Args& in) {
                     auto p = split(in[0], 4, 1);
                     return multiply(p[1], add(p[1], array(2.0)));
                   },
                   {x});
  // Empty pieces among used ones.
  check_transforms("empty pieces",
                   [](const Args& in) {
                     auto p = split(in[0], Shape{0, 3, 3, 8}, 1);
                     return add(sum(p[1]), multiply(sum(p[0]), sum(p[3])));
                   },
                   {x});
  // Unsorted indices: the pieces [0, 5) and [2, 8) overlap.
  check_transforms("overlapping pieces",
                   [](const Args& in) {
                     auto p = split(in[0], Shape{5, 2}, 1);
                     return add(sum(square(p[0])), sum(multiply(p[2], p[2])));
                   },
                   {x});
  // A broadcast and a strided input.
  check_transforms("split of broadcast",
                   [](const Args& in) {
                     auto p = split(broadcast_to(in[0], {4, 6}), 3, 1);
                     return multiply(p[0], p[2]);
                   },
                   {rnd({6})});
  check_transforms(
      "split of strided slice",
      [](const Args& in) {
        auto p = split(slice(in[0], Shape{0, 1}, Shape{3, 8}, Shape{1, 2}), Shape{-1}, 1);
        return sum(p[0], std::vector<int>{1});
      },
      {x});
}

TEST(GradSplit, LowPrecisionMatchesFloat64) {
  // sum(w * piece_k) weighted per piece: the gradient is w at each piece's
  // place, exactly representable in every float dtype.
  auto w = random_array({4, 2}, float64, -2, 2);
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    auto f = [&](const array& v) {
      auto p = split(v, Shape{2, 5}, 1);
      return add(sum(multiply(p[0], astype(w, dt))),
                 sum(multiply(p[2], array(3.0, dt))));
    };
    auto g = grad(f)(astype(random_array({4, 9}, float64), dt));
    EXPECT_EQ(g.dtype(), dt);
    auto wv = to_doubles(astype(w, dt));
    std::vector<double> want;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 9; ++j) {
        want.push_back(j < 2 ? wv[i * 2 + j] : j < 5 ? 0.0 : 3.0);
      }
    }
    EXPECT_EQ(to_doubles(g), want) << dtype_name(dt);
  }
}

TEST(GradSplit, JvpIsTheSplitTangent) {
  auto x = rnd({3, 6});
  auto t = rnd({3, 6});
  auto [outs, tans] = jvp(
      [](const Args& in) { return split(in[0], Shape{1, 4}, 1); }, {x}, {t});
  auto want = split(t, Shape{1, 4}, 1);
  ASSERT_EQ(tans.size(), 3u);
  EXPECT_EQ(tans[0].primitive().name(), std::string("Split"));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(to_doubles(tans[k]), to_doubles(want[k])) << k;
  }
}

TEST(GradSplit, VmapOverEachAxis) {
  for (int in_axis = 0; in_axis < 3; ++in_axis) {
    for (int axis : {0, 1, -1}) {
      auto f = [axis](const Args& in) {
        auto p = split(in[0], Shape{1}, axis);
        return add(sum(p[0]), multiply(sum(p[1]), array(2.0)));
      };
      EXPECT_TRUE(check_vmap(f, {rnd({3, 4, 5})}, {in_axis}))
          << "in_axis " << in_axis << " split axis " << axis;
    }
  }
  // Several mapped outputs, by count.
  auto x = rnd({4, 3});
  auto pieces = vmap([](const Args& in) { return split(in[0], 2, 0); }, {1},
                {0, 1})({x});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(pieces[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(to_doubles(pieces[0]),
            to_doubles(transpose(slice(x, {0, 0}, {2, 3}))));
  EXPECT_EQ(to_doubles(pieces[1]), to_doubles(slice(x, {2, 0}, {4, 3})));
}

TEST(GradSplit, BackwardGraphIsOneConcatenate) {
  auto f = [](const array& v) {
    auto p = split(v, 3, -1);
    return add(sum(p[0]), add(sum(square(p[1])), sum(exp(p[2]))));
  };
  auto x = random_array({2, 5, 12}, float32);
  auto g = grad(f)(x);
  auto counts = node_counts({g});
  EXPECT_EQ(counts["Concatenate"], 1);
  EXPECT_EQ(counts["SliceUpdate"], 0);
  EXPECT_EQ(counts["Slice"], 0);
  // Two of three pieces unused: one Concatenate with zeros.
  auto h = grad([](const array& v) { return sum(split(v, 3, 2)[1]); })(x);
  counts = node_counts({h});
  EXPECT_EQ(counts["Concatenate"], 1);
  EXPECT_EQ(counts["SliceUpdate"], 0);
  std::vector<double> want;
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 12; ++j) want.push_back(j >= 4 && j < 8 ? 1 : 0);
  }
  EXPECT_EQ(to_doubles(h), want);
}

TEST(GradSplit, GptBlockGradientHasFewerNodes) {
  // One attention block: q, k, v = split(x @ w_qkv, 3, -1). The old split
  // was three slices, kept here as the comparison.
  const int b = 2, t = 8, d = 16, heads = 2;
  auto block = [&](bool use_split) {
    return [=](const Args& in) {
      auto qkv = matmul(in[0], in[1]);
      std::vector<array> p;
      if (use_split) {
        p = split(qkv, 3, -1);
      } else {
        for (int k = 0; k < 3; ++k) {
          p.push_back(slice(qkv, {0, 0, k * d}, {b, t, (k + 1) * d}));
        }
      }
      auto heads_first = [&](const array& a) {
        return transpose(reshape(a, {b, t, heads, d / heads}), {0, 2, 1, 3});
      };
      auto o = fast::scaled_dot_product_attention(
          heads_first(p[0]), heads_first(p[1]), heads_first(p[2]), 0.5f,
          "causal");
      o = reshape(transpose(o, {0, 2, 1, 3}), {b, t, d});
      return sum(square(add(in[0], matmul(o, in[2]))));
    };
  };
  Args in = {random_array({b, t, d}, float32, -1, 1),
             random_array({d, 3 * d}, float32, -0.3, 0.3),
             random_array({d, d}, float32, -0.3, 0.3)};
  auto before = grad(block(false), {0, 1, 2})(in);
  auto after = grad(block(true), {0, 1, 2})(in);
  auto cb = node_counts(before), ca = node_counts(after);
  std::cout << "GPT block gradient graph: " << total(cb)
            << " nodes with three slices (" << cb["SliceUpdate"]
            << " SliceUpdate), " << total(ca) << " with Split ("
            << ca["Concatenate"] << " Concatenate)\n";
  EXPECT_EQ(cb["SliceUpdate"], 3);
  EXPECT_EQ(ca["SliceUpdate"], 0);
  EXPECT_EQ(ca["Split"], 1);
  EXPECT_LT(total(ca), total(cb));
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(all_close(to_doubles(after[k]), to_doubles(before[k]), 1e-5,
                          1e-5))
        << k;
  }
}

TEST(GradSplit, CompiledEqualsEagerWithOneSplitAfterCse) {
  auto f = [](const Args& in) {
    // The same split twice: CSE merges the two nodes.
    auto a = split(in[0], Shape{2, 3}, 1);
    auto b = split(in[0], Shape{2, 3}, 1);
    return std::vector<array>{
        add(exp(a[0]), b[0]), multiply(a[2], sin(b[2])), a[1]};
  };
  auto x = random_array({3, 7}, float32);
  auto cf = compile(f);
  auto got = cf({x});
  auto want = f({x});
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-6, 1e-6));
  }
  auto text = export_compiled_graph(cf, {x});
  size_t splits = 0;
  for (size_t at = text.find("Split"); at != std::string::npos;
       at = text.find("Split", at + 1)) {
    ++splits;
  }
  EXPECT_EQ(splits, 1u) << text;
  // grad through compile equals grad of the plain function.
  auto loss = [](const Args& in) {
    auto p = split(in[0], 3, 0);
    return sum(multiply(p[0], exp(p[2])));
  };
  auto y = random_array({6, 4}, float32);
  auto gc = grad(
      [&](const Args& in) { return compile([&](const Args& a) {
                                 return Args{loss(a)};
                               })(in)[0]; })({y});
  auto ge = grad(loss)({y});
  EXPECT_TRUE(all_close(to_doubles(gc[0]), to_doubles(ge[0]), 1e-6, 1e-6));
}

TEST(GradSplit, ShapelessCompile) {
  // Equal parts follow the new size; indices stay absolute, so the last
  // piece takes the rest (as split at the new size would).
  int traces = 0;
  auto f = [&](const Args& in) {
    ++traces;
    auto p = split(in[0], 2, 1);
    auto q = split(in[0], Shape{1}, 0);
    return Args{add(p[0], p[1]), sum(q[1], std::vector<int>{1})};
  };
  auto cf = compile(f, true);
  cf({random_array({3, 4}, float32)});
  auto x = random_array({5, 6}, float32);
  auto got = cf({x});
  EXPECT_EQ(traces, 1);
  auto want = f({x});
  ASSERT_EQ(got[0].shape(), (Shape{5, 3}));
  ASSERT_EQ(got[1].shape(), (Shape{4}));
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-6, 1e-6));
  }
  // A size that no longer splits into equal parts raises.
  EXPECT_THROW(cf({random_array({5, 5}, float32)}), std::invalid_argument);
}

TEST(GradSplit, ShapelessCompileOfAConcatenationGradient) {
  // The gradient is one Split like the primals: under shapeless compile its
  // pieces follow new extents along the axis (three inputs, the middle one
  // repeated, so a piece's gradient adds up), and vmap and jvp of it too.
  auto loss = [](const Args& in) {
    auto c = concatenate({in[0], in[1], in[0]}, 1);
    return sum(multiply(c, c));
  };
  auto g = [&](const Args& in) { return grad(loss, {0, 1})(in); };
  auto cg = compile(g, true);
  for (auto [r, n, m] : {std::array<int, 3>{3, 4, 2}, {5, 1, 6}, {2, 7, 3}}) {
    Args in = {random_array({r, n}, float64), random_array({r, m}, float64)};
    auto got = cg(in);
    auto want = g(in);
    ASSERT_EQ(got[0].shape(), (Shape{r, n}));
    ASSERT_EQ(got[1].shape(), (Shape{r, m}));
    for (int k = 0; k < 2; ++k) {
      EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-12,
                            1e-12));
    }
  }
  // vmap of the gradient over a leading axis, compiled shapeless.
  auto vg = compile([&](const Args& in) { return vmap(g)(in); }, true);
  for (auto [b, n] : {std::array<int, 2>{2, 3}, {4, 5}}) {
    Args in = {random_array({b, 2, n}, float64),
               random_array({b, 2, 3}, float64)};
    auto got = vg(in);
    auto want = vmap(g)(in);
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(got[k].shape(), want[k].shape());
      EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-12,
                            1e-12));
    }
  }
  // jvp of the gradient (a Hessian-vector product), compiled shapeless:
  // the loss is quadratic, so it is the gradient of the tangents.
  auto hvp = compile(
      [&](const Args& in) {
        return jvp(g, {in[0], in[1]}, {in[2], in[3]}).second;
      },
      true);
  for (auto [r, n] : {std::array<int, 2>{3, 4}, {2, 6}}) {
    Args in = {random_array({r, n}, float64), random_array({r, 2}, float64),
               random_array({r, n}, float64), random_array({r, 2}, float64)};
    auto got = hvp(in);
    auto want = g({in[2], in[3]});
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(got[k].shape(), want[k].shape());
      EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-12,
                            1e-12));
    }
  }
}

} // namespace
} // namespace kiln::test
