// vjp / jvp / vmap of Gather, Scatter (none, sum, prod, max, min),
// GatherAxis and ScatterAxis through take, take_along_axis, put_along_axis,
// scatter_add_axis and the general gather / scatter ops. Index values
// include duplicates, negative ones and out-of-range ones (gathers clamp,
// scatters drop), so the rules must follow what the kernels did.
#include "transforms/grad_check.h"

#include "kiln/core/primitive.h"

namespace kiln::test {
namespace {

using Args = std::vector<array>;

array rnd(const Shape& s) { return random_array(s, float64, -1.5, 1.5); }

array ints(std::vector<int32_t> v, Shape s, Dtype dt = int32) {
  return astype(array(v, s, int32), dt);
}

TEST(GradIndexing, Take) {
  auto x = rnd({4, 5});
  auto idx = ints({1, -1, 3, 1, 0, 7}, {2, 3}); // 7 clamps to 3
  check_transforms("take axis",
                   [](const Args& in) { return take(in[0], in[1], 1); },
                   {x, idx}, {1});
  check_transforms("take axis 0 transposed",
                   [](const Args& in) { return take(in[0], in[1], 0); },
                   {as_transposed(x), ints({2, 2, -4}, {3}, uint8)}, {1});
  check_transforms("take flat",
                   [](const Args& in) { return take(in[0], in[1]); },
                   {x, ints({19, 0, 5, 5}, {4}, int64)}, {1});
  check_transforms("take 0-d index",
                   [](const Args& in) { return take(in[0], in[1], 1); },
                   {x, ints({2}, {}, int16)}, {1});
  check_transforms("take empty index",
                   [](const Args& in) { return take(in[0], in[1], 1); },
                   {x, ints({}, {0})}, {1});
  check_transforms("take broadcast source",
                   [](const Args& in) {
                     return take(broadcast_to(in[0], {3, 5}), in[1], 1);
                   },
                   {rnd({5}), idx}, {1});
}

TEST(GradIndexing, Gather) {
  auto f = [](const Args& in) {
    return gather(in[0], {in[1], in[2]}, {0, 2}, {1, 2, 2});
  };
  // Starts past the end or negative are wrapped / clamped so slices fit.
  auto i0 = ints({0, 3, -1, 9}, {4});
  auto i1 = ints({1, 4, 4, -5}, {4});
  check_transforms("gather", f, {rnd({4, 3, 5}), i0, i1}, {1, 2});
  check_transforms("gather transposed", f,
                   {as_transposed(rnd({4, 3, 5})), ints({2, 1}, {2, 1}),
                    ints({0, 3}, {1, 2})},
                   {1, 2});
  // Distinct indices per batch element, with the source mapped or not.
  auto bi0 = ints({0, 1, 2, 3, -1, 2, 1, 1, 0, 3, 3, 9}, {3, 4});
  auto bi1 = ints({0, 1, 2, 3, 4, -1, -2, 0, 1, 1, 2, 3}, {3, 4});
  EXPECT_TRUE(check_vmap(f, {rnd({4, 3, 5}), bi0, bi1}, {-1, 0, 0}));
  EXPECT_TRUE(check_vmap(f, {rnd({4, 3, 5}), bi0, i1}, {-1, 0, -1}));
  EXPECT_TRUE(check_vmap(f, {rnd({4, 3, 5, 3}), bi0, i1}, {3, 0, -1}));
  EXPECT_TRUE(
      check_vmap(f, {rnd({4, 3, 3, 5}), transpose(bi0), bi1}, {2, 1, 0}));
}

TEST(GradIndexing, TakeAlongAxis) {
  auto idx = ints({0, 2, 2, -1, 1, 5, 0, 0}, {2, 4}); // 5 clamps
  auto f = [](const Args& in) { return take_along_axis(in[0], in[1], 1); };
  check_transforms("take_along_axis", f, {rnd({2, 3}), idx}, {1});
  check_transforms("take_along_axis broadcast", f,
                   {as_transposed(rnd({1, 3})), idx}, {1});
  check_transforms("take_along_axis flat",
                   [](const Args& in) { return take_along_axis(in[0], in[1]); },
                   {rnd({2, 3}), idx}, {1});
  auto bidx = ints({0, 1, 2, 0, 2, 1, 1, 1, 0, 2, 2, 2}, {3, 2, 2});
  EXPECT_TRUE(check_vmap(f, {rnd({2, 3}), bidx}, {-1, 0}));
  EXPECT_TRUE(check_vmap(f, {rnd({2, 3, 3}), bidx}, {2, 0}));
}

TEST(GradIndexing, TakeAlongAxisOneIndexPerLine) {
  // Cross-entropy's pick: one index per line (negative, clamped too). The
  // gradient is a select of the cotangent, not a scatter into zeros.
  auto f = [](const Args& in) { return take_along_axis(in[0], in[1], 1); };
  auto rows = ints({3, -1, 9, 0}, {4, 1});
  check_transforms("pick per row", f, {rnd({4, 7}), rows}, {1});
  check_transforms("pick per row transposed", f,
                   {as_transposed(rnd({4, 7})), rows}, {1});
  auto g = [](const Args& in) { return take_along_axis(in[0], in[1], 0); };
  check_transforms("pick per column", g,
                   {rnd({6, 5}), ints({5, -6, 2, 0, 1}, {1, 5}, int64)}, {1});
  auto x = rnd({4, 7});
  auto cot = rnd({4, 1});
  auto grads = vjp([&](const Args& in) { return Args{f(in)}; }, {x, rows},
                   {cot})
                   .second;
  EXPECT_EQ(std::string(grads[0].primitive().name()), "Select");
  auto xs = to_doubles(x);
  auto cs = to_doubles(cot);
  std::vector<double> want(28, 0.0);
  int picked[4] = {3, 6, 6, 0};
  for (int r = 0; r < 4; ++r) want[r * 7 + picked[r]] = cs[r];
  EXPECT_EQ(to_doubles(grads[0]), want);
}

TEST(GradIndexing, PutAlongAxis) {
  // Duplicates (the last write wins) and an index past the end (dropped).
  auto idx = ints({0, 2, 0, 9, 1, -1, 1, 2}, {2, 4});
  std::vector<std::pair<const char*, std::function<array(const Args&)>>> cases =
      {
          {"put_along_axis",
           [](const Args& in) {
             return put_along_axis(in[0], in[1], in[2], 1);
           }},
          {"scatter_add_axis",
           [](const Args& in) {
             return scatter_add_axis(in[0], in[1], in[2], 1);
           }},
      };
  for (auto& [name, f] : cases) {
    check_transforms(name, f, {rnd({2, 3}), idx, rnd({2, 4})}, {1});
    check_transforms(
        std::string(name) + " transposed", f,
        {as_transposed(rnd({2, 3})), idx, as_transposed(rnd({2, 4}))}, {1});
    // A scalar value broadcast to every index.
    check_transforms(std::string(name) + " broadcast", f,
                     {rnd({2, 3}), idx, rnd({})}, {1});
    auto bidx = ints({0, 1, 2, 0, 2, 2, 1, 1, 0, 2, 2, 2}, {3, 2, 2});
    EXPECT_TRUE(check_vmap(f, {rnd({2, 3}), bidx, rnd({2, 2})}, {-1, 0, -1}));
    EXPECT_TRUE(
        check_vmap(f, {rnd({2, 3, 3}), bidx, rnd({2, 3, 2})}, {2, 0, 1}));
    EXPECT_TRUE(check_vmap(f, {rnd({2, 3}), idx, rnd({3, 2, 4})}, {-1, -1, 0}));
  }
  // Overwritten values, source and updates alike, get no gradient.
  auto g = grad(
      [](const Args& in) {
        return sum(put_along_axis(in[0], in[1], in[2], 0));
      },
      std::vector<int>{0, 2})({rnd({3}), ints({1, 1, 5}, {3}), rnd({3})});
  EXPECT_EQ(to_doubles(g[0]), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(to_doubles(g[1]), (std::vector<double>{0, 1, 0}));
}

TEST(GradIndexing, Scatter) {
  std::vector<std::pair<const char*, std::function<array(const Args&)>>> cases =
      {
          {"scatter",
           [](const Args& in) { return scatter(in[0], in[1], in[2], 1); }},
          {"scatter_add",
           [](const Args& in) { return scatter_add(in[0], in[1], in[2], 1); }},
          {"scatter_prod",
           [](const Args& in) { return scatter_prod(in[0], in[1], in[2], 1); }},
          {"scatter_max",
           [](const Args& in) { return scatter_max(in[0], in[1], in[2], 1); }},
          {"scatter_min",
           [](const Args& in) { return scatter_min(in[0], in[1], in[2], 1); }},
      };
  // Duplicates, a negative index and one whose slice does not fit (dropped).
  auto idx = ints({1, 3, 1, -2, 4}, {5});
  for (auto& [name, f] : cases) {
    check_transforms(name, f, {rnd({3, 5}), idx, rnd({5, 3, 2})}, {1});
    check_transforms(std::string(name) + " transposed", f,
                     {as_transposed(rnd({3, 5})), ints({0, 2}, {2}),
                      as_transposed(rnd({2, 1, 3}))},
                     {1});
    check_transforms(std::string(name) + " broadcast", f,
                     {rnd({3, 5}), ints({0, 3}, {2}), rnd({1, 1, 1})}, {1});
    auto bidx = ints({0, 1, 3, 1, 2, 4}, {3, 2});
    EXPECT_TRUE(check_vmap(f, {rnd({3, 5}), bidx, rnd({2, 3, 1})}, {-1, 0, -1}))
        << name;
    EXPECT_TRUE(
        check_vmap(f, {rnd({3, 5, 3}), bidx, rnd({3, 2, 3, 1})}, {2, 0, 0}))
        << name;
    EXPECT_TRUE(check_vmap(
        f, {rnd({3, 5}), ints({0, 4}, {2}), rnd({2, 3, 1, 3})}, {-1, -1, 3}))
        << name;
  }
  // Several index arrays.
  auto f2 = [](const Args& in) {
    return scatter_add(in[0], {in[1], in[2]}, in[3], {0, 1});
  };
  check_transforms(
      "scatter_add 2 axes", f2,
      {rnd({4, 5}), ints({0, 3, 0}, {3}), ints({1, 1, 1}, {3}), rnd({3, 1, 2})},
      {1, 2});
}

TEST(GradIndexing, ScatterEdgeValues) {
  // scatter_prod with zero updates: exact, no division by zero. Position 0
  // gets one zero, position 1 two zeros, position 2 none.
  auto a = array({2.0, 3.0, 5.0}, float64);
  auto idx = ints({0, 0, 1, 1, 2}, {5});
  auto u = array({0.0, 4.0, 0.0, 0.0, 7.0}, {5, 1}, float64);
  auto g = grad(
      [&](const Args& in) { return sum(scatter_prod(in[0], idx, in[1], 0)); },
      std::vector<int>{0, 1})({a, u});
  EXPECT_EQ(to_doubles(g[0]), (std::vector<double>{0, 0, 7}));
  EXPECT_EQ(to_doubles(g[1]), (std::vector<double>{8, 0, 0, 0, 5}));
  check_transforms(
      "scatter_prod zeros",
      [&](const Args& in) { return scatter_prod(in[0], idx, in[1], 0); },
      {a, u});
  // scatter_max ties: the source and the equal update share the gradient.
  auto gm = grad(
      [&](const Args& in) {
        return sum(scatter_max(in[0], ints({0, 0, 1}, {3}), in[1], 0));
      },
      std::vector<int>{0, 1})(
      {array({1.0, 5.0}, float64), array({1.0, 0.5, 2.0}, {3, 1}, float64)});
  EXPECT_EQ(to_doubles(gm[0]), (std::vector<double>{0.5, 1}));
  EXPECT_EQ(to_doubles(gm[1]), (std::vector<double>{0.5, 0, 0}));
  // Empty index arrays: nothing is written.
  check_transforms(
      "scatter empty",
      [](const Args& in) { return scatter(in[0], in[1], in[2], 0); },
      {rnd({3, 2}), ints({}, {0}), rnd({0, 1, 2})}, {1});
}

TEST(GradIndexing, IndicesGetZeroGradients) {
  // Indices computed from the input: the gradient flows through the
  // values only, and argsort's positions get none.
  auto x = rnd({6});
  auto g = grad([](const array& v) {
    return sum(multiply(take_along_axis(v, argsort(v), 0), v));
  })(x);
  auto xs = to_doubles(x);
  auto sorted = to_doubles(sort(x));
  auto order = to_doubles(argsort(x));
  std::vector<double> want(6);
  for (int i = 0; i < 6; ++i) want[i] = sorted[i];
  for (int i = 0; i < 6; ++i) want[static_cast<int>(order[i])] += xs[i];
  EXPECT_TRUE(all_close(to_doubles(g), want, 1e-12, 1e-12));
  auto t = jvp([](const array& v) { return take(v, argsort(v), 0); }, x,
               ones_like(x))
               .second;
  EXPECT_EQ(to_doubles(t), std::vector<double>(6, 1.0));
  auto gi = grad([](const Args& in) { return sum(take(in[0], in[1], 0)); },
                 std::vector<int>{1})({x, ints({1, 2}, {2})});
  EXPECT_EQ(gi[0].dtype(), int32);
  EXPECT_EQ(to_doubles(gi[0]), (std::vector<double>{0, 0}));
}

TEST(GradIndexing, Compositions) {
  // grad of grad through take (gather) and its vjp (scatter_add).
  auto idx = ints({0, 2, 2, 3}, {4});
  std::function<array(const array&)> f = [&](const array& v) {
    return sum(power(take(v, idx, 0), array(3.0)));
  };
  check_transforms("grad of take",
                   [&](const Args& in) { return grad(f)(in[0]); }, {rnd({4})});
  // vmap of grad with indices per example.
  auto h = [](const Args& in) {
    return grad([&](const array& v) {
      return sum(square(scatter_max(v, in[1], in[2], 0)));
    })(in[0]);
  };
  auto bidx = ints({0, 1, 2, 2, 1, 0}, {3, 2});
  // vmap of vmap: the source mapped outside, the indices inside.
  Fn tk = [](const Args& in) { return Args{take(in[0], in[1], 0)}; };
  auto x = rnd({2, 5});
  auto ix = ints({0, 4, 1, 1, 3, 2, -1, 0, 2, 2, 9, 4}, {3, 4});
  auto vv = vmap(vmap(tk, {-1, 0}), {0, -1})({x, ix})[0];
  EXPECT_EQ(vv.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(to_doubles(vv), to_doubles(take(x, ix, 1)));
  EXPECT_TRUE(check_vmap(h, {rnd({3, 3}), bidx, rnd({3, 2, 1})}, {0, 0, 0}));
  EXPECT_TRUE(check_vmap(h, {rnd({3, 3}), bidx, rnd({2, 1})}, {0, 0, -1}));
}

} // namespace
} // namespace kiln::test
