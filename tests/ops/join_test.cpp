// concatenate, stack, split, repeat, tile and pad against reference loops.
#include "ops/index_helpers.h"

namespace kiln::test {
namespace {

std::vector<double> iota_d(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(Join, ConcatenateMatchesReference) {
  for (Dtype dt : all_dtypes()) {
    std::vector<array> parts{
        random_array({2, 3, 4}, dt, -50, 50),
        as_transposed(random_array({2, 1, 4}, dt, -50, 50)),
        random_array({2, 0, 4}, dt),
        broadcast_to(random_array({1, 5, 4}, dt, -50, 50), {2, 5, 4})};
    for (int axis : {1, -2}) {
      auto out = concatenate(parts, axis);
      EXPECT_EQ(out.shape(), (Shape{2, 9, 4}));
      EXPECT_EQ(out.dtype(), dt);
      std::vector<double> want;
      for (int i = 0; i < 2; ++i) {
        for (auto& p : parts) {
          Ref r(p);
          for (int j = 0; j < p.shape(1); ++j) {
            for (int k = 0; k < 4; ++k) want.push_back(r.at({i, j, k}));
          }
        }
      }
      EXPECT_EQ(to_doubles(out), want) << dt;
    }
  }
}

TEST(Join, ConcatenatePromotesAndFlattens) {
  // mlx: concatenate([int32 [1, 2], float16 [1.5]]) is float16 [1, 2, 1.5].
  auto c = concatenate({array({1, 2}), array({1.5f}, float16)});
  EXPECT_EQ(c.dtype(), float16);
  EXPECT_EQ(to_doubles(c), (std::vector<double>{1, 2, 1.5}));
  auto mixed = concatenate({random_array({2}, bool_), random_array({3}, int8),
                            random_array({1}, uint8)});
  EXPECT_EQ(mixed.dtype(), promote_types(promote_types(bool_, int8), uint8));
  auto a = random_array({2, 3}, float32);
  auto b = random_array({4}, float32);
  auto flat = concatenate({transpose(a), b});
  auto want = to_doubles(transpose(a));
  for (double v : to_doubles(b)) want.push_back(v);
  EXPECT_EQ(to_doubles(flat), want);
  EXPECT_EQ(to_doubles(concatenate({a}, 1)), to_doubles(a));
}

TEST(Join, Stack) {
  auto a = random_array({3, 4}, float16);
  auto b = as_transposed(random_array({3, 4}, float16));
  Ref ra(a), rb(b);
  auto s0 = stack({a, b});
  auto s2 = stack({a, b}, -1);
  EXPECT_EQ(s0.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(s2.shape(), (Shape{3, 4, 2}));
  Ref r0(s0), r2(s2);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(r0.at({0, i, j}), ra.at({i, j}));
      EXPECT_EQ(r0.at({1, i, j}), rb.at({i, j}));
      EXPECT_EQ(r2.at({i, j, 0}), ra.at({i, j}));
      EXPECT_EQ(r2.at({i, j, 1}), rb.at({i, j}));
    }
  }
  EXPECT_EQ(to_doubles(stack({array(1), array(2)})),
            (std::vector<double>{1, 2}));
}

TEST(Join, SplitGivesViews) {
  auto a = random_array({3, 12}, int32, -50, 50);
  Ref r(a);
  auto parts = split(a, 3, 1);
  ASSERT_EQ(parts.size(), 3u);
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(parts[p].shape(), (Shape{3, 4}));
    std::vector<double> want;
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 4; ++j) want.push_back(r.at({i, p * 4 + j}));
    }
    EXPECT_EQ(to_doubles(parts[p]), want);
    EXPECT_EQ(parts[p].buffer().ptr, a.buffer().ptr);
  }
  // Sizes printed by mlx for split(arange(10), [3, 7]), [7, 3], and for
  // split on an axis of 4 at [-1] and [9].
  auto x = arange(10);
  auto sizes = [](const std::vector<array>& v) {
    std::vector<size_t> s;
    for (auto& a : v) s.push_back(a.size());
    return s;
  };
  EXPECT_EQ(sizes(split(x, Shape{3, 7})), (std::vector<size_t>{3, 4, 3}));
  auto odd = split(x, Shape{7, 3});
  EXPECT_EQ(sizes(odd), (std::vector<size_t>{7, 0, 7}));
  EXPECT_EQ(to_doubles(odd[2]), (std::vector<double>{3, 4, 5, 6, 7, 8, 9}));
  auto m = reshape(arange(12), {3, 4});
  EXPECT_EQ(split(m, Shape{-1}, 1)[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(split(m, Shape{9}, 1)[1].shape(), (Shape{3, 0}));
  EXPECT_EQ(sizes(split(zeros({0}), 3)), (std::vector<size_t>{0, 0, 0}));
}

TEST(Join, RepeatAndTile) {
  for (Dtype dt : {bool_, int16, uint64, bfloat16, float64}) {
    auto a = as_transposed(random_array({2, 3}, dt, -50, 50));
    Ref r(a);
    for (int axis : {0, 1, -1}) {
      int ax = axis < 0 ? axis + 2 : axis;
      auto out = repeat(a, 3, axis);
      Shape shape = a.shape();
      shape[ax] *= 3;
      EXPECT_EQ(out.shape(), shape);
      Ref o(out);
      for (size_t i = 0; i < out.size(); ++i) {
        auto idx = unravel(i, shape);
        idx[ax] /= 3;
        EXPECT_EQ(o.v[i], r.at(idx));
      }
    }
    std::vector<double> flat;
    for (double v : r.v) flat.insert(flat.end(), {v, v});
    EXPECT_EQ(to_doubles(repeat(a, 2)), flat);
    EXPECT_EQ(repeat(a, 0, 1).shape(), (Shape{2, 0}));

    for (auto reps :
         std::vector<std::vector<int>>{{2}, {3, 1}, {2, 1, 2}, {0, 2}}) {
      auto out = tile(a, reps);
      Shape base = a.shape();
      while (base.size() < reps.size()) base.insert(base.begin(), 1);
      while (reps.size() < base.size()) reps.insert(reps.begin(), 1);
      Shape shape;
      for (size_t d = 0; d < base.size(); ++d)
        shape.push_back(base[d] * reps[d]);
      EXPECT_EQ(out.shape(), shape);
      Ref o(out);
      for (size_t i = 0; i < out.size(); ++i) {
        auto idx = unravel(i, shape);
        for (size_t d = 0; d < idx.size(); ++d) idx[d] %= base[d];
        idx.erase(idx.begin(), idx.begin() + (idx.size() - 2));
        EXPECT_EQ(o.v[i], r.at(idx));
      }
    }
  }
  // mlx: repeat(array(3), 3) = [3, 3, 3]; tile(array(3), [2, 2]) is 2x2.
  EXPECT_EQ(to_doubles(repeat(array(3), 3)), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(tile(array(3), {2, 2}).shape(), (Shape{2, 2}));
}

TEST(Join, PadConstantAndEdge) {
  for (Dtype dt : all_dtypes()) {
    auto a = as_transposed(random_array({3, 4}, dt, -50, 50));
    Ref r(a);
    auto c = pad(a, {{1, 2}, {0, 3}}, array(1));
    auto e = pad(a, {{1, 2}, {0, 3}}, array(0), "edge");
    EXPECT_EQ(c.shape(), (Shape{6, 7}));
    EXPECT_EQ(c.dtype(), dt);
    Ref rc(c), re(e);
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 7; ++j) {
        int64_t si = i - 1, sj = j;
        bool inside = si >= 0 && si < 3 && sj < 4;
        EXPECT_EQ(rc.at({i, j}), inside ? r.at({si, sj}) : 1.0) << dt;
        EXPECT_EQ(re.at({i, j}), r.at({std::clamp<int64_t>(si, 0, 2),
                                       std::min<int64_t>(sj, 3)}));
      }
    }
  }
  // mlx: pad(arange(6).reshape(2, 3), 1, constant_values=2.5) pads an int32
  // array with 2; pad([1, 2, 3], (1, 2)) = [0, 1, 2, 3, 0, 0].
  auto m = reshape(arange(6), {2, 3});
  auto p = to_doubles(pad(m, 1, array(2.5f)));
  EXPECT_EQ(p.size(), 20u);
  EXPECT_EQ(p[0], 2);
  EXPECT_EQ(p[6], 0);
  EXPECT_EQ(to_doubles(pad(array({1, 2, 3}), std::make_pair(1, 2))),
            (std::vector<double>{0, 1, 2, 3, 0, 0}));
  // The axes form pads only the named axes; a 0-d array pads to itself.
  EXPECT_EQ(pad(m, std::vector<int>{-1}, Shape{2}, Shape{0}).shape(),
            (Shape{2, 5}));
  EXPECT_EQ(to_doubles(pad(array(3), 1)), (std::vector<double>{3}));
}

TEST(Join, PadReflectAndSymmetricMatchNumpy) {
  // From numpy: np.pad(np.arange(4), (6, 5), mode=...).
  EXPECT_EQ(to_doubles(pad(arange(4), {6, 5}, array(0), "reflect")),
            (std::vector<double>{0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2}));
  EXPECT_EQ(to_doubles(pad(arange(4), {6, 5}, array(0), "symmetric")),
            (std::vector<double>{2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0, 0}));
  // From numpy, with m = np.arange(6).reshape(3, 2).T (transposed):
  // np.pad(m, 2, mode="symmetric")[1] and np.pad(m, 1, mode="reflect")[0].
  auto m = transpose(reshape(arange(6), {3, 2}));
  auto sym = pad(m, 2, array(0), "symmetric");
  EXPECT_EQ(to_doubles(take(sym, 1, 0)),
            (std::vector<double>{2, 0, 0, 2, 4, 4, 2}));
  EXPECT_EQ(to_doubles(take(pad(m, 1, array(0), "reflect"), 0, 0)),
            (std::vector<double>{3, 1, 3, 5, 3}));
}

TEST(Join, BadArgumentsRaise) {
  auto a = random_array({3, 4}, float32);
  EXPECT_TRUE(throws_naming([&] { return concatenate({}, 0); }, "concatenate"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return concatenate({a, zeros({2, 4})}, 1);
      },
      "concatenate"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return concatenate({a, a}, 2);
      },
      "concatenate"));
  EXPECT_TRUE(throws_naming([&] { return stack({a, transpose(a)}); }, "stack"));
  EXPECT_TRUE(throws_naming([&] { return stack({}); }, "stack"));
  EXPECT_TRUE(throws_naming([&] { return split(a, 3, 1); }, "split"));
  EXPECT_TRUE(throws_naming([&] { return split(a, 0, 1); }, "split"));
  EXPECT_TRUE(throws_naming([&] { return split(a, 2, 2); }, "split"));
  EXPECT_TRUE(throws_naming([&] { return repeat(a, -1, 0); }, "repeat"));
  EXPECT_TRUE(throws_naming([&] { return repeat(a, 2, -3); }, "repeat"));
  EXPECT_TRUE(throws_naming([&] { return tile(a, {-1}); }, "tile"));
  EXPECT_TRUE(throws_naming([&] { return pad(a, {{1, -1}, {0, 0}}); }, "pad"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return pad(a, {{1, 1}, {1, 1}, {1, 1}});
      },
      "pad"));
  EXPECT_TRUE(
      throws_naming([&] { return pad(a, 1, array(0), "wrap"); }, "pad"));
  EXPECT_TRUE(throws_naming([&] { return pad(a, 1, array({1, 2})); }, "pad"));
  EXPECT_TRUE(throws_naming(
      [&] { return pad(a, std::vector<int>{2}, Shape{1}, Shape{1}); }, "pad"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return pad(zeros({0, 3}), 1, array(0), "edge");
      },
      "pad"));
}

} // namespace
} // namespace kiln::test
