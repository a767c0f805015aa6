// vjp / jvp / vmap of Sort, Partition (and topk, built on it), and the
// positions ArgSort / ArgPartition, which have no gradient.
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

using Args = std::vector<array>;

array rnd(const Shape& s) { return random_array(s, float64, -1.5, 1.5); }

TEST(GradSort, Sort) {
  auto x = rnd({4, 5});
  check_transforms("sort last", [](const Args& in) { return sort(in[0], -1); },
                   {x});
  check_transforms("sort first", [](const Args& in) { return sort(in[0], 0); },
                   {as_transposed(x)});
  check_transforms("sort flat", [](const Args& in) { return sort(in[0]); },
                   {x});
  check_transforms("sort broadcast",
                   [](const Args& in) {
                     return sort(add(broadcast_to(in[0], {3, 5}), in[1]), 1);
                   },
                   {rnd({5}), rnd({3, 1})});
  // The gradient of each sorted slot lands where its value came from.
  auto v = array({3.0, 1.0, 2.0}, float64);
  auto w = array({10.0, 20.0, 30.0}, float64);
  auto g = grad([&](const array& a) { return sum(multiply(sort(a), w)); })(v);
  EXPECT_EQ(to_doubles(g), (std::vector<double>{30, 10, 20}));
}

TEST(GradSort, PartitionAndTopk) {
  auto x = rnd({3, 7});
  for (int kth : {0, 3, -1}) {
    check_transforms("partition " + std::to_string(kth),
                     [&](const Args& in) { return partition(in[0], kth, 1); },
                     {x});
  }
  check_transforms("partition axis 0",
                   [](const Args& in) { return partition(in[0], 1, 0); },
                   {as_transposed(x)});
  check_transforms("topk", [](const Args& in) { return topk(in[0], 3, 1); },
                   {x});
  check_transforms("topk flat", [](const Args& in) { return topk(in[0], 2); },
                   {as_transposed(x)});
  // The k largest values carry the gradient, the rest none.
  auto v = array({0.5, 4.0, -1.0, 3.0, 2.0}, float64);
  auto g = grad([](const array& a) { return sum(topk(a, 2)); })(v);
  EXPECT_EQ(to_doubles(g), (std::vector<double>{0, 1, 0, 1, 0}));
  // Ties: equal values share one derivative, so any pairing is exact.
  auto t = array({1.0, 2.0, 1.0, 2.0, 0.0}, float64);
  auto gt = grad([](const array& a) {
    return sum(multiply(partition(a, 2), arange(1.0, 6.0, float64)));
  })(t);
  // Each value's inputs together get the weights of the slots holding it.
  auto gs = to_doubles(gt), ys = to_doubles(partition(t, 2)),
       ts = to_doubles(t);
  for (double value : {0.0, 1.0, 2.0}) {
    double got = 0, want = 0;
    for (int i = 0; i < 5; ++i) {
      if (ts[i] == value) got += gs[i];
      if (ys[i] == value) want += i + 1;
    }
    EXPECT_EQ(got, want) << value;
  }
}

TEST(GradSort, PositionsHaveNoGradient) {
  auto x = rnd({2, 6});
  std::vector<std::pair<const char*, std::function<array(const array&)>>>
      cases = {
          {"argsort", [](auto& v) { return argsort(v, 1); }},
          {"argpartition", [](auto& v) { return argpartition(v, 2, 1); }},
      };
  for (auto& [name, f] : cases) {
    auto g =
        grad([&](const array& v) { return sum(astype(f(v), float64)); })(x);
    EXPECT_EQ(to_doubles(g), std::vector<double>(12, 0.0)) << name;
    auto t = jvp(f, x, ones_like(x)).second;
    EXPECT_EQ(t.dtype(), uint32) << name;
    EXPECT_EQ(to_doubles(t), std::vector<double>(12, 0.0)) << name;
    EXPECT_TRUE(
        check_vmap([&](const Args& in) { return astype(f(in[0]), int32); },
                   {rnd({3, 2, 6})}, {0}))
        << name;
    EXPECT_TRUE(
        check_vmap([&](const Args& in) { return astype(f(in[0]), int32); },
                   {rnd({2, 6, 3})}, {2}))
        << name;
  }
}

TEST(GradSort, Compositions) {
  // grad of grad: d/dx of sort(x)^2 weighted is a permuted 2 w.
  std::function<array(const array&)> f = [](const array& v) {
    return sum(multiply(square(sort(v)), arange(1.0, 6.0, float64)));
  };
  check_transforms("grad of sort",
                   [&](const Args& in) { return grad(f)(in[0]); }, {rnd({5})});
  std::function<array(const array&)> p = [](const array& v) {
    return sum(power(topk(v, 2), array(3.0)));
  };
  check_transforms("grad of topk",
                   [&](const Args& in) { return grad(p)(in[0]); }, {rnd({6})});
  // vmap of grad: per-row gradients.
  EXPECT_TRUE(check_vmap([&](const Args& in) { return grad(p)(in[0]); },
                         {rnd({4, 6})}, {0}));
}

} // namespace
} // namespace kiln::test
