// vjp / jvp / vmap of the ops built from slices, joins and reductions
// (flip, roll, diagonal, diag, trace, unstack, diff, meshgrid, kron, vecdot,
// median), of logcumsumexp's scan rules, of real / imag / conjugate and of
// searchsorted's vmap.
#include <limits>

#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

using Args = std::vector<array>;

array rnd(const Shape& s) { return random_array(s, float64, -1.5, 1.5); }

TEST(GradArrayFunctions, Rearrangements) {
  auto x = rnd({3, 4, 5});
  check_transforms("flip",
                   [](const Args& in) {
                     return flip(in[0], {0, 2});
                   },
                   {x});
  check_transforms("roll",
                   [](const Args& in) {
                     return roll(in[0], Shape{2, -3}, {1, 2});
                   },
                   {as_transposed(x)});
  check_transforms("roll flat", [](const Args& in) { return roll(in[0], 5); },
                   {x});
  check_transforms(
      "diagonal", [](const Args& in) { return diagonal(in[0], 1, 2, 0); }, {x});
  check_transforms("diagonal negative",
                   [](const Args& in) { return diagonal(in[0], -1, 1, 2); },
                   {as_transposed(x)});
  check_transforms("diag build", [](const Args& in) { return diag(in[0], 2); },
                   {rnd({4})});
  check_transforms("diag read", [](const Args& in) { return diag(in[0], -1); },
                   {rnd({4, 4})});
  check_transforms("trace",
                   [](const Args& in) { return trace(in[0], 1, 0, 2); }, {x});
  check_transforms("unstack",
                   [](const Args& in) { return unstack(in[0], 1)[2]; }, {x});
  check_transforms("diff", [](const Args& in) { return diff(in[0], 2, 1); },
                   {x});
  check_transforms("meshgrid",
                   [](const Args& in) {
                     auto g = meshgrid({in[0], in[1]});
                     return multiply(g[0], g[1]);
                   },
                   {rnd({3}), rnd({4})});
  check_transforms("kron", [](const Args& in) { return kron(in[0], in[1]); },
                   {rnd({2, 3}), rnd({3, 2})});
  check_transforms("vecdot",
                   [](const Args& in) { return vecdot(in[0], in[1], 0); },
                   {rnd({4, 3}), rnd({4, 1})});
  check_transforms("median odd",
                   [](const Args& in) { return median(in[0], 2); }, {x});
  check_transforms("median even",
                   [](const Args& in) {
                     return median(in[0], {0, 2});
                   },
                   {x});
}

TEST(GradArrayFunctions, Logcumsumexp) {
  auto x = random_array({3, 6}, float64, -4, 4);
  for (bool reverse : {false, true}) {
    for (bool inclusive : {true, false}) {
      auto name = std::string("logcumsumexp ") + (reverse ? "rev " : "") +
                  (inclusive ? "incl" : "excl");
      // An exclusive scan's first output is -inf (no finite difference):
      // the checks see the other outputs.
      auto finite = [=](const array& y, int axis) {
        if (inclusive) return y;
        int n = y.shape(axis);
        Shape start(y.ndim(), 0), stop = y.shape();
        (reverse ? stop[axis] : start[axis]) = reverse ? n - 1 : 1;
        return slice(y, start, stop);
      };
      check_transforms(name,
                       [=](const Args& in) {
                         return finite(
                             logcumsumexp(in[0], 1, reverse, inclusive), 1);
                       },
                       {x});
      check_transforms(name + " axis 0",
                       [=](const Args& in) {
                         return finite(
                             logcumsumexp(in[0], 0, reverse, inclusive), 0);
                       },
                       {as_transposed(x)});
    }
  }
  // Far-apart values: the gradient stays finite and sums to 1 per output.
  auto wide = array({-500.0, 0.0, 600.0}, float64);
  auto g =
      grad([](const array& a) { return take(logcumsumexp(a), 2, 0); })(wide);
  auto gv = to_doubles(g);
  EXPECT_NEAR(gv[0] + gv[1] + gv[2], 1.0, 1e-12);
  EXPECT_NEAR(gv[2], 1.0, 1e-12);
  // -inf inputs (an empty prefix) pass gradient to none and take none.
  auto ninf = -std::numeric_limits<double>::infinity();
  auto with_inf = array({ninf, ninf, 1.0, 2.0}, float64);
  auto gi = to_doubles(grad([](const array& a) {
    return sum(slice(logcumsumexp(a), {2}, {4}));
  })(with_inf));
  EXPECT_EQ(gi[0], 0.0);
  EXPECT_EQ(gi[1], 0.0);
  EXPECT_NEAR(gi[2] + gi[3], 2.0, 1e-12);
  // Second derivatives are finite: the vjp of the vjp against finite
  // differences of the gradient.
  auto w = array({1.0, -2.0, 3.0}, float64);
  EXPECT_TRUE(check_vjp(
      [&](const Args& in) {
        return grad([&](const array& a) {
          return sum(multiply(logcumsumexp(a), w));
        })(in[0]);
      },
      {array({0.3, -1.2, 2.0}, float64)}));
}

TEST(GradArrayFunctions, ComplexParts) {
  auto re = random_array({2, 3}, float32), im = random_array({2, 3}, float32);
  auto z = add(astype(re, complex64),
               multiply(astype(im, complex64), array(complex64_t(0, 1))));
  auto c = random_array({2, 3}, float32);
  // vjp of real: the cotangent as a complex number with zero imaginary part;
  // of imag: i times it; conjugate: conjugated.
  auto vr = vjp([](const Args& in) { return Args{real(in[0])}; }, {z}, {c});
  auto vi = vjp([](const Args& in) { return Args{imag(in[0])}; }, {z}, {c});
  EXPECT_EQ(to_doubles(real(vr.second[0])), to_doubles(c));
  EXPECT_EQ(to_doubles(imag(vr.second[0])), std::vector<double>(6, 0.0));
  EXPECT_EQ(to_doubles(imag(vi.second[0])), to_doubles(c));
  EXPECT_EQ(to_doubles(real(vi.second[0])), std::vector<double>(6, 0.0));
  auto vc =
      vjp([](const Args& in) { return Args{conjugate(in[0])}; }, {z}, {z});
  EXPECT_EQ(to_doubles(imag(vc.second[0])), to_doubles(negative(im)));
  // jvp: the parts of the tangent.
  auto jr = jvp([](const Args& in) { return Args{imag(in[0])}; }, {z}, {z});
  EXPECT_EQ(to_doubles(jr.second[0]), to_doubles(im));
  // vmap keeps the batch axis where it is.
  auto vm = vmap([](const Args& in) { return Args{real(conjugate(in[0]))}; },
                 {1})({z});
  EXPECT_EQ(to_doubles(vm[0]), to_doubles(transpose(re)));
}

TEST(GradArrayFunctions, SearchsortedVmap) {
  auto seq = sort(random_array({3, 8}, float32, -5, 5), 1);
  auto values = random_array({3, 4}, float32, -6, 6);
  for (auto side : {"left", "right"}) {
    std::string s = side;
    // Sequence and values both batched, then only the values.
    check_vmap([s](const Args& in) { return searchsorted(in[0], in[1], s); },
               {seq, values}, {0, 0});
    check_vmap([s](const Args& in) { return searchsorted(in[0], in[1], s); },
               {seq, transpose(values)}, {0, 1});
    auto one = take(seq, 0, 0);
    check_vmap([s, one](const Args& in) { return searchsorted(one, in[0], s); },
               {values}, {1});
  }
  auto g = grad([&](const array& v) {
    return sum(multiply(astype(searchsorted(take(seq, 0, 0), v), float32), v));
  })(take(values, 0, 0));
  EXPECT_EQ(to_doubles(g),
            to_doubles(astype(searchsorted(take(seq, 0, 0), take(values, 0, 0)),
                              float32)));
}

} // namespace
} // namespace kiln::test
