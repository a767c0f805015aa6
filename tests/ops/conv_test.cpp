// Convolutions against direct float64 loops: forward (gather form) for
// conv1d/2d/3d and conv_general, and the scatter form for transposed
// convolutions, on strided, broadcast and half-precision inputs.
#include <functional>
#include <tuple>

#include "linalg_helpers.h"

namespace kiln::test {
namespace {

struct Params {
  std::vector<int> stride, lo, hi, kdil, idil;
  int groups = 1;
  bool flip = false;
};

// Calls fn(o) for every multi-index o of shape dims.
void for_each_index(const std::vector<int>& dims,
                    const std::function<void(const std::vector<int>&)>& fn) {
  std::vector<int> o(dims.size(), 0);
  for (int d : dims) {
    if (d == 0) return;
  }
  while (true) {
    fn(o);
    int d = static_cast<int>(dims.size()) - 1;
    for (; d >= 0; --d) {
      if (++o[d] < dims[d]) break;
      o[d] = 0;
    }
    if (d < 0) return;
  }
}

// Row-major flat offset of (n, idx..., c) in a (N, dims..., C) array.
int64_t flat(int n, const std::vector<int>& idx, int c,
             const std::vector<int>& dims, int chans) {
  int64_t f = n;
  for (size_t d = 0; d < dims.size(); ++d) f = f * dims[d] + idx[d];
  return f * chans + c;
}

// out[n, o, co] = sum_{k, c} x[n, (o*s + k*kd - lo) / idil, g*Cg + c] *
//                 w[co, flip ? K-1-k : k, c], skipping holes and padding.
std::vector<double> ref_conv(const array& x, const array& w, const Params& p,
                             Shape& out_shape) {
  auto xv = to_doubles(x), wv = to_doubles(w);
  int nd = static_cast<int>(x.ndim()) - 2;
  int n_batch = x.shape(0), cin = x.shape(-1), cout = w.shape(0);
  int cg = w.shape(-1), cog = cout / p.groups;
  std::vector<int> in(nd), k(nd), out(nd);
  out_shape = {n_batch};
  for (int d = 0; d < nd; ++d) {
    in[d] = x.shape(d + 1);
    k[d] = w.shape(d + 1);
    int virt = (in[d] - 1) * p.idil[d] + 1;
    out[d] =
        (virt + p.lo[d] + p.hi[d] - (k[d] - 1) * p.kdil[d] - 1) / p.stride[d] +
        1;
    out_shape.push_back(out[d]);
  }
  out_shape.push_back(cout);
  std::vector<double> res;
  for (int n = 0; n < n_batch; ++n) {
    for_each_index(out, [&](const std::vector<int>& o) {
      for (int co = 0; co < cout; ++co) {
        int g = co / cog;
        double acc = 0;
        for_each_index(k, [&](const std::vector<int>& kk) {
          std::vector<int> pos(nd), wk(nd);
          for (int d = 0; d < nd; ++d) {
            int v = o[d] * p.stride[d] + kk[d] * p.kdil[d] - p.lo[d];
            int virt = (in[d] - 1) * p.idil[d] + 1;
            if (v < 0 || v >= virt || v % p.idil[d] != 0) return;
            pos[d] = v / p.idil[d];
            wk[d] = p.flip ? k[d] - 1 - kk[d] : kk[d];
          }
          for (int c = 0; c < cg; ++c) {
            acc += xv[flat(n, pos, g * cg + c, in, cin)] *
                   wv[flat(co, wk, c, k, cg)];
          }
        });
        res.push_back(acc);
      }
    });
  }
  return res;
}

// Transposed convolution in scatter form: each input element adds
// x * w[co, k] at output position i*s + k*d - pad.
std::vector<double> ref_conv_transpose(const array& x, const array& w,
                                       std::vector<int> s, std::vector<int> pad,
                                       std::vector<int> dil,
                                       std::vector<int> opad, int groups,
                                       Shape& out_shape) {
  auto xv = to_doubles(x), wv = to_doubles(w);
  int nd = static_cast<int>(x.ndim()) - 2;
  int n_batch = x.shape(0), cin = x.shape(-1), cout = w.shape(0);
  int cg = w.shape(-1), cog = cout / groups;
  std::vector<int> in(nd), k(nd), out(nd);
  out_shape = {n_batch};
  size_t total = n_batch * cout;
  for (int d = 0; d < nd; ++d) {
    in[d] = x.shape(d + 1);
    k[d] = w.shape(d + 1);
    out[d] =
        (in[d] - 1) * s[d] - 2 * pad[d] + dil[d] * (k[d] - 1) + opad[d] + 1;
    out_shape.push_back(out[d]);
    total *= out[d];
  }
  out_shape.push_back(cout);
  std::vector<double> res(total, 0.0);
  for (int n = 0; n < n_batch; ++n) {
    for_each_index(in, [&](const std::vector<int>& i) {
      for_each_index(k, [&](const std::vector<int>& kk) {
        std::vector<int> o(nd);
        for (int d = 0; d < nd; ++d) {
          o[d] = i[d] * s[d] + kk[d] * dil[d] - pad[d];
          if (o[d] < 0 || o[d] >= out[d]) return;
        }
        for (int co = 0; co < cout; ++co) {
          int g = co / cog;
          for (int c = 0; c < cg; ++c) {
            res[flat(n, o, co, out, cout)] +=
                xv[flat(n, i, g * cg + c, in, cin)] *
                wv[flat(co, kk, c, k, cg)];
          }
        }
      });
    });
  }
  return res;
}

Params forward_params(int nd, std::vector<int> s, std::vector<int> pad,
                      std::vector<int> dil, int groups) {
  return {s, pad, pad, dil, std::vector<int>(nd, 1), groups, false};
}

void expect_matches(const array& got, const std::vector<double>& want,
                    const Shape& shape, int reduction,
                    const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  Dtype dt = got.dtype();
  double rtol = dt == float64 ? 1e-12 : (dt == float32 ? 1e-5 : tolerance(dt));
  double atol = (dt == float64 ? 1e-13 : 1e-5) * std::max(reduction, 1);
  EXPECT_TRUE(all_close(to_doubles(got), want, rtol, atol))
      << what << " " << dt;
}

// Input layouts with the same values: contiguous, column-major, channel-
// sliced, spatially reversed (negative strides) and batch-broadcast.
std::vector<std::pair<std::string, array>> layouts(const array& x) {
  Shape one = x.shape();
  one[0] = 1;
  auto row = random_array(one, x.dtype());
  return {{"contiguous", x},
          {"transposed", as_transposed(x)},
          {"sliced", sliced_copy(x)},
          {"reversed", reversed(x, 1)},
          {"broadcast", broadcast_to(row, x.shape())}};
}

TEST(Conv, Conv1dMatchesDirectLoops) {
  struct Case {
    Shape x, w;
    int stride, pad, dil, groups;
  };
  std::vector<Case> cases = {{{2, 10, 4}, {6, 3, 4}, 1, 0, 1, 1},
                             {{2, 11, 4}, {5, 3, 4}, 2, 1, 2, 1},
                             {{1, 9, 4}, {6, 3, 2}, 1, 2, 1, 2},
                             {{2, 8, 4}, {4, 5, 1}, 3, 2, 1, 4},
                             {{3, 6, 5}, {7, 1, 5}, 1, 0, 1, 1}};
  for (Dtype dt : float_dtypes()) {
    for (auto& c : cases) {
      auto w = random_array(c.w, dt);
      for (auto& [name, x] : layouts(random_array(c.x, dt))) {
        Shape shape;
        auto want = ref_conv(
            x, w, forward_params(1, {c.stride}, {c.pad}, {c.dil}, c.groups),
            shape);
        auto got = conv1d(x, w, c.stride, c.pad, c.dil, c.groups);
        expect_matches(got, want, shape, c.w[1] * c.w[2], name);
      }
      // A weight in another layout is copied to row-major first.
      auto x = random_array(c.x, dt);
      auto wt = as_transposed(w);
      Shape shape;
      auto want = ref_conv(
          x, wt, forward_params(1, {c.stride}, {c.pad}, {c.dil}, c.groups),
          shape);
      expect_matches(conv1d(x, wt, c.stride, c.pad, c.dil, c.groups), want,
                     shape, c.w[1] * c.w[2], "weight transposed");
    }
  }
}

TEST(Conv, Conv2dAnd3dMatchDirectLoops) {
  for (Dtype dt : float_dtypes()) {
    auto x = random_array({2, 7, 6, 3}, dt), w = random_array({4, 3, 2, 3}, dt);
    for (auto& [name, xv] : layouts(x)) {
      for (auto& wv : {w, as_transposed(w)}) {
        Shape shape;
        auto want = ref_conv(
            xv, wv, forward_params(2, {2, 1}, {1, 0}, {1, 2}, 1), shape);
        expect_matches(conv2d(xv, wv, {2, 1}, {1, 0}, {1, 2}), want, shape, 18,
                       name);
      }
    }
    auto xg = random_array({1, 5, 5, 6}, dt),
         wg = random_array({4, 3, 3, 3}, dt);
    Shape shape;
    auto want =
        ref_conv(xg, wg, forward_params(2, {1, 2}, {1, 1}, {1, 1}, 2), shape);
    expect_matches(conv2d(xg, wg, {1, 2}, {1, 1}, {1, 1}, 2), want, shape, 27,
                   "groups");
    // One input channel, padded (a first layer, as the digits LeNet's).
    auto x1 = random_array({3, 8, 8, 1}, dt), w1 = random_array({16, 3, 3, 1}, dt);
    for (auto& [name, xv] : layouts(x1)) {
      want = ref_conv(xv, w1, forward_params(2, {1, 1}, {1, 1}, {1, 1}, 1),
                      shape);
      expect_matches(conv2d(xv, w1, {1, 1}, {1, 1}), want, shape, 9,
                     "one channel " + name);
    }
  }
  auto x3 = random_array({1, 4, 5, 3, 2}, float32);
  auto w3 = random_array({3, 2, 3, 2, 2}, float32);
  Shape shape;
  auto want = ref_conv(
      x3, w3, forward_params(3, {1, 2, 1}, {0, 1, 1}, {1, 1, 2}, 1), shape);
  expect_matches(conv3d(x3, w3, {1, 2, 1}, {0, 1, 1}, {1, 1, 2}), want, shape,
                 24, "conv3d");
}

TEST(Conv, ConvGeneralDilationFlipAndAsymmetricPadding) {
  for (Dtype dt : {float32, float64, bfloat16}) {
    auto x = random_array({2, 7, 4}, dt), w = random_array({6, 3, 2}, dt);
    Params p{{2}, {1}, {2}, {2}, {3}, 2, true};
    Shape shape;
    auto want = ref_conv(x, w, p, shape);
    auto got = conv_general(x, w, {2}, {1}, {2}, {2}, {3}, 2, true);
    expect_matches(got, want, shape, 6, "1d");
    auto x2 = random_array({1, 5, 4, 3}, dt),
         w2 = random_array({2, 2, 3, 3}, dt);
    Params p2{{2, 1}, {1, 0}, {0, 2}, {1, 2}, {2, 1}, 1, true};
    want = ref_conv(x2, w2, p2, shape);
    got = conv_general(as_transposed(x2), w2, {2, 1}, {1, 0}, {0, 2}, {1, 2},
                       {2, 1}, 1, true);
    expect_matches(got, want, shape, 18, "2d");
  }
}

// Many input channels, few output channels (an input gradient's shape):
// the CPU then sums over the taps after the product where the input is
// row-major (im2col elsewhere). 1-d, 2-d (LeNet's first input gradient:
// 16 channels to 1) and 3-d, with strides, asymmetric padding, both
// dilations, flips and groups, every layout, against the loops.
TEST(Conv, FewOutputChannelsMatchDirectLoops) {
  for (Dtype dt : float_dtypes()) {
    auto x1 = random_array({3, 9, 16}, dt), w1 = random_array({2, 3, 8}, dt);
    Params p1{{2}, {2}, {1}, {2}, {2}, 2, true};
    auto x2 = random_array({4, 8, 8, 16}, dt),
         w2 = random_array({1, 3, 3, 16}, dt);
    Params p2{{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false};
    auto x3 = random_array({2, 4, 3, 5, 12}, dt),
         w3 = random_array({3, 2, 2, 3, 12}, dt);
    Params p3{{1, 2, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 2}, {1, 2, 1}, 1, false};
    for (auto& [x, w, p, what] :
         {std::tuple{x1, w1, p1, "1d"}, std::tuple{x2, w2, p2, "2d"},
          std::tuple{x3, w3, p3, "3d"}}) {
      for (auto& [name, xv] : layouts(x)) {
        Shape shape;
        auto want = ref_conv(xv, w, p, shape);
        auto got = conv_general(xv, w, p.stride, p.lo, p.hi, p.kdil, p.idil,
                                p.groups, p.flip);
        expect_matches(got, want, shape,
                       static_cast<int>(w.size() / w.shape(0)),
                       std::string(what) + " " + name);
      }
    }
  }
}

TEST(Conv, TransposedMatchesScatterLoops) {
  struct Case {
    Shape x, w;
    int s, pad, dil, opad, groups;
  };
  std::vector<Case> cases = {{{2, 5, 4}, {6, 3, 4}, 1, 0, 1, 0, 1},
                             {{2, 5, 4}, {6, 3, 4}, 2, 1, 1, 1, 1},
                             {{1, 6, 4}, {6, 3, 2}, 3, 2, 2, 1, 2},
                             {{2, 4, 3}, {2, 4, 3}, 2, 0, 1, 0, 1}};
  for (Dtype dt : float_dtypes()) {
    for (auto& c : cases) {
      auto w = random_array(c.w, dt);
      for (auto& [name, x] : layouts(random_array(c.x, dt))) {
        Shape shape;
        auto want = ref_conv_transpose(x, w, {c.s}, {c.pad}, {c.dil}, {c.opad},
                                       c.groups, shape);
        auto got = conv_transpose1d(x, w, c.s, c.pad, c.dil, c.opad, c.groups);
        expect_matches(got, want, shape, c.w[1] * c.w[2], name);
      }
    }
    auto x = random_array({1, 5, 5, 4}, dt), w = random_array({3, 2, 3, 4}, dt);
    Shape shape;
    auto want =
        ref_conv_transpose(x, w, {2, 1}, {1, 0}, {1, 2}, {1, 0}, 1, shape);
    auto got = conv_transpose2d(x, w, {2, 1}, {1, 0}, {1, 2}, {1, 0});
    expect_matches(got, want, shape, 24, "2d");
  }
}

TEST(Conv, ZeroSizePromotionAndLargeInputs) {
  auto w = random_array({6, 3, 4}, float32);
  auto e = conv1d(random_array({0, 10, 4}, float32), w);
  EXPECT_EQ(e.shape(), (Shape{0, 8, 6}));
  EXPECT_TRUE(to_doubles(e).empty());
  // No input channels: every sum is empty.
  auto z = conv1d(random_array({2, 5, 0}, float32),
                  random_array({3, 2, 0}, float32));
  EXPECT_EQ(z.shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(to_doubles(z), std::vector<double>(24, 0.0));
  auto x16 = random_array({2, 10, 4}, float16);
  auto mixed = conv1d(x16, w);
  EXPECT_EQ(mixed.dtype(), float32);
  Shape shape;
  auto want = ref_conv(x16, w, forward_params(1, {1}, {0}, {1}, 1), shape);
  expect_matches(mixed, want, shape, 12, "mixed");
  // Enough output rows that the unfolded input is processed in blocks.
  auto big = random_array({1, 70000, 8}, float32);
  auto wb = random_array({2, 8, 8}, float32);
  want = ref_conv(big, wb, forward_params(1, {1}, {3}, {1}, 1), shape);
  expect_matches(conv1d(big, wb, 1, 3), want, shape, 64, "blocks");
}

TEST(Conv, BadInputs) {
  auto x = random_array({2, 10, 4}, float32),
       w = random_array({6, 3, 4}, float32);
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(x, random_array({6, 3, 3}, float32));
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(x, random_array({6, 3, 2}, float32), 1, 0, 1, 3);
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(x, random_array({5, 3, 2}, float32), 1, 0, 1, 2);
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming([&] { conv1d(x, w, 1, 0, 1, 0); }, "conv1d"));
  EXPECT_TRUE(throws_naming([&] { conv1d(x, w, 1, -1); }, "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(x, random_array({6, 11, 4}, float32));
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(x, random_array({6, 6, 4}, float32), 1, 0, 2);
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(x, random_array({6, 0, 4}, float32));
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming([&] { conv1d(x, w, 0); }, "conv1d"));
  EXPECT_TRUE(throws_naming([&] { conv1d(x, w, 1, 0, 0); }, "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(random_array({2, 10, 4}, int32), random_array({6, 3, 4}, int32));
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(random_array({10, 4}, float32), w);
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv1d(x, random_array({3, 4}, float32));
      },
      "conv1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv2d(random_array({1, 5, 5, 4}, float32),
               random_array({3, 2, 2, 4}, float32), {1, 1}, {-1, 0});
      },
      "conv2d"));
  EXPECT_TRUE(throws_naming([&] { conv_transpose1d(x, w, 1, 0, 1, -1); },
                            "conv_transpose1d"));
  EXPECT_TRUE(throws_naming([&] { conv_transpose1d(x, w, 1, -1); },
                            "conv_transpose1d"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv_general(x, w, {1, 1});
      },
      "conv_general"));
  EXPECT_TRUE(throws_naming(
      [&] {
        conv_general(random_array({4, 4}, float32), w);
      },
      "conv_general"));
}

} // namespace
} // namespace kiln::test
