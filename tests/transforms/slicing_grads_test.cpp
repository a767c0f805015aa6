// vjp / jvp / vmap of the slicing and joining primitives (static and
// dynamic slices and updates, concatenate, as_strided) and of the ops built
// on them (stack, split, repeat, tile, pad, take with an int index).
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

using Args = std::vector<array>;

array rnd(const Shape& s) { return random_array(s, float64, -1.5, 1.5); }

array ints(std::vector<int32_t> v, Shape s) { return array(v, s, int32); }

TEST(GradSlicing, StaticSlice) {
  auto x = rnd({4, 5});
  check_transforms("slice",
                   [](const Args& in) {
                     return slice(in[0], Shape{1, 0}, Shape{4, 5}, Shape{2, 2});
                   },
                   {x});
  // Negative steps over the whole axis (the normalized stop is -1).
  check_transforms(
      "slice reversed",
      [](const Args& in) {
        return slice(in[0], Shape{3, 4}, Shape{-5, -6}, Shape{-1, -2});
      },
      {as_transposed(x)});
  check_transforms("take int",
                   [](const Args& in) { return take(in[0], -2, 1); }, {x});
  check_transforms(
      "slice of broadcast",
      [](const Args& in) {
        return slice(broadcast_to(in[0], {3, 4}), Shape{0, 1}, Shape{3, 4});
      },
      {rnd({4})});
  // An empty window: the gradient is all zeros.
  auto g = grad([](const array& v) {
    return sum(slice(v, Shape{2}, Shape{2}));
  })(rnd({4}));
  EXPECT_EQ(to_doubles(g), std::vector<double>(4, 0.0));
}

TEST(GradSlicing, SplitStackConcatenate) {
  check_transforms("split",
                   [](const Args& in) {
                     auto p = split(in[0], 2, 1);
                     return multiply(p[0], p[1]);
                   },
                   {rnd({3, 4})});
  check_transforms("split at indices",
                   [](const Args& in) {
                     auto p = split(in[0], Shape{1, 3}, 0);
                     return add(sum(p[0]), multiply(sum(p[1]), sum(p[2])));
                   },
                   {as_transposed(rnd({5, 2}))});
  check_transforms("concatenate",
                   [](const Args& in) {
                     return concatenate({in[0], in[1], in[0]}, 1);
                   },
                   {rnd({2, 3}), as_transposed(rnd({2, 2}))});
  check_transforms(
      "concatenate broadcast",
      [](const Args& in) {
        return concatenate({broadcast_to(in[0], {2, 3}), in[1]}, 0);
      },
      {rnd({3}), rnd({1, 3})});
  check_transforms("stack",
                   [](const Args& in) {
                     return stack({in[0], in[1]}, 1);
                   },
                   {rnd({2, 3}), rnd({2, 3})});
  // The concatenated integer input gets no gradient; the float one does.
  check_transforms("concatenate mixed",
                   [](const Args& in) {
                     return concatenate({in[0], astype(in[1], float64)}, 0);
                   },
                   {rnd({2}), ints({1, 2, 3}, {3})}, {1});
}

TEST(GradSlicing, RepeatTilePad) {
  auto x = rnd({2, 3});
  std::vector<std::pair<const char*, std::function<array(const array&)>>>
      cases = {
          {"repeat", [](auto& v) { return repeat(v, 3, 1); }},
          {"repeat flat", [](auto& v) { return repeat(v, 2); }},
          {"tile",
           [](auto& v) {
             return tile(v, {2, 1, 2});
           }},
          {"pad constant",
           [](auto& v) {
             return pad(v, {{1, 2}, {0, 1}});
           }},
          {"pad edge",
           [](auto& v) {
             return pad(v, {{2, 1}, {1, 3}}, array(0), "edge");
           }},
          {"pad reflect",
           [](auto& v) {
             return pad(v, {{1, 1}, {2, 2}}, array(0), "reflect");
           }},
          {"pad symmetric",
           [](auto& v) {
             return pad(v, {{1, 2}, {3, 1}}, array(0), "symmetric");
           }},
      };
  for (auto& [name, f] : cases) {
    check_transforms(name, [&](const Args& in) { return f(in[0]); }, {x});
    check_transforms(std::string(name) + " transposed",
                     [&](const Args& in) { return f(in[0]); },
                     {as_transposed(x)});
  }
  // The constant pad value gets the sum of the padded cotangents.
  check_transforms("pad value",
                   [](const Args& in) {
                     return pad(in[0], {{1, 0}, {2, 1}}, in[1]);
                   },
                   {x, rnd({})});
}

TEST(GradSlicing, SliceUpdate) {
  auto f = [](const Args& in) {
    return slice_update(in[0], in[1], Shape{1, 0}, Shape{4, 5}, Shape{2, 2});
  };
  check_transforms("slice_update", f, {rnd({4, 5}), rnd({2, 3})});
  check_transforms("slice_update transposed", f,
                   {as_transposed(rnd({4, 5})), as_transposed(rnd({2, 3}))});
  // A broadcast update gets the window's cotangents summed.
  check_transforms("slice_update broadcast", f, {rnd({4, 5}), rnd({1, 3})});
  check_transforms("slice_update reversed",
                   [](const Args& in) {
                     return slice_update(in[0], in[1], Shape{3}, Shape{-5},
                                         Shape{-1});
                   },
                   {rnd({4}), rnd({4})});
}

TEST(GradSlicing, DynamicSlice) {
  auto f = [](const Args& in) { return slice(in[0], in[1], {0, 1}, {2, 3}); };
  // In range, negative (wraps) and past the end (clamped).
  for (auto start :
       {ints({1, 2}, {2}), ints({-3, -1}, {2}), ints({9, 7}, {2})}) {
    check_transforms("dynamic slice", f, {rnd({4, 5}), start}, {1});
  }
  auto g = [](const Args& in) { return slice(in[0], in[1], {1}, {3, 2}); };
  check_transforms("dynamic slice 0-d start", g,
                   {as_transposed(rnd({3, 4})), array(int8_t{-1})}, {1});
  // A start per batch element, with the source mapped or not.
  auto x = rnd({4, 5});
  auto starts = ints({0, 0, 2, 3, -1, 1, 9, -9}, {4, 2});
  EXPECT_TRUE(check_vmap(f, {x, starts}, {-1, 0}));
  EXPECT_TRUE(check_vmap(f, {rnd({4, 5, 4}), transpose(starts)}, {2, 1}));
  EXPECT_TRUE(check_vmap(g, {rnd({2, 3, 4}), ints({0, 3}, {2})}, {0, 0}));
  // The start gets a zero gradient.
  auto gs = grad(
      [](const Args& in) {
        return sum(slice(in[0], in[1], {0}, {2, 5}));
      },
      std::vector<int>{0, 1})({x, ints({1}, {1})});
  EXPECT_EQ(to_doubles(gs[1]), std::vector<double>{0});
  EXPECT_EQ(gs[1].dtype(), int32);
}

TEST(GradSlicing, DynamicSliceUpdate) {
  auto f = [](const Args& in) {
    return slice_update(in[0], in[1], in[2], {0, 1});
  };
  for (auto start :
       {ints({1, 2}, {2}), ints({-1, -4}, {2}), ints({8, 8}, {2})}) {
    check_transforms("dynamic slice_update", f,
                     {rnd({4, 5}), rnd({2, 3}), start}, {2});
  }
  check_transforms("dynamic slice_update transposed", f,
                   {as_transposed(rnd({4, 5})), as_transposed(rnd({3, 2})),
                    ints({1, 1}, {2})},
                   {2});
  // A start per batch element (wrapped, clamped), sources mapped or not.
  auto starts = ints({0, 0, 2, 3, -1, 1, 9, -9}, {4, 2});
  EXPECT_TRUE(check_vmap(f, {rnd({4, 5}), rnd({2, 3}), starts}, {-1, -1, 0}));
  EXPECT_TRUE(
      check_vmap(f, {rnd({4, 4, 5}), rnd({2, 3, 4}), starts}, {0, 2, 0}));
  EXPECT_TRUE(check_vmap(f, {rnd({4, 5}), rnd({4, 2, 3}), starts}, {-1, 0, 0}));
}

TEST(GradSlicing, AsStrided) {
  // Overlapping windows read elements several times.
  auto f = [](const Args& in) { return as_strided(in[0], {3, 4}, {2, 1}, 1); };
  check_transforms("as_strided", f, {rnd({3, 4})});
  check_transforms("as_strided transposed", f, {as_transposed(rnd({3, 4}))});
  check_transforms("as_strided negative",
                   [](const Args& in) {
                     return as_strided(in[0], {2, 3}, {-3, 1}, 4);
                   },
                   {rnd({8})});
  auto e = grad([](const array& v) {
    return sum(as_strided(v, {0, 2}, {1, 1}, 0));
  })(rnd({3}));
  EXPECT_EQ(to_doubles(e), std::vector<double>(3, 0.0));
}

TEST(GradSlicing, Compositions) {
  // grad of grad through slices and updates: d2/dx2 of sum(x[1:]^3 * 2).
  std::function<array(const array&)> f = [](const array& v) {
    auto u = slice_update(zeros_like(v), slice(v, Shape{1}, Shape{4}), Shape{0},
                          Shape{3});
    return sum(multiply(power(u, array(3.0)), array(2.0)));
  };
  auto x = rnd({4});
  auto g2 = grad([&](const array& v) { return sum(grad(f)(v)); })(x);
  auto xs = to_doubles(x);
  std::vector<double> want = {0, 12 * xs[1], 12 * xs[2], 12 * xs[3]};
  EXPECT_TRUE(all_close(to_doubles(g2), want, 1e-10, 1e-10));
  // vmap of grad with a dynamic start per example.
  auto h = [](const Args& in) {
    return grad([&](const array& v) {
      return sum(square(slice(v, in[1], {0}, {2})));
    })(in[0]);
  };
  auto starts = ints({0, 2, 5}, {3});
  EXPECT_TRUE(check_vmap(h, {rnd({3, 4}), starts}, {0, 0}));
}

} // namespace
} // namespace kiln::test
