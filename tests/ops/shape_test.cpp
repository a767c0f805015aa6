// Shape ops and creation ops.
#include "test_utils.h"

namespace kiln::test {
namespace {

TEST(Shape, ReshapeViewsAndCopies) {
  auto x = random_array({2, 3, 4}, float32);
  auto r = reshape(x, {6, -1});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  r.eval();
  EXPECT_EQ(r.data<float>(), x.data<float>()); // a view
  EXPECT_EQ(to_doubles(r), to_doubles(x));
  // A transposed array reshaped so strides can express it stays a view...
  auto t = transpose(x, {1, 0, 2});
  auto v = reshape(t, {3, 2, 2, 2});
  EXPECT_EQ(to_doubles(v), to_doubles(t));
  // ...and one they cannot express is copied, with the right values.
  auto tt = transpose(x);
  auto flat = reshape(tt, {-1});
  EXPECT_EQ(to_doubles(flat), to_doubles(tt));
  EXPECT_THROW(reshape(x, {5, -1}), std::invalid_argument);
  EXPECT_THROW(reshape(x, {-1, -1}), std::invalid_argument);
  EXPECT_THROW(reshape(x, {7}), std::invalid_argument);
  EXPECT_EQ(reshape(zeros({0, 3}), {3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(reshape(array(2.0f), {1, 1}).shape(), (Shape{1, 1}));
}

TEST(Shape, TransposeFamily) {
  auto x = random_array({2, 3, 4}, int32, -9, 9);
  auto xs = to_doubles(x);
  auto t = transpose(x, {2, 0, 1});
  EXPECT_EQ(t.shape(), (Shape{4, 2, 3}));
  auto ts = to_doubles(t);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(ts[(i * 2 + j) * 3 + k], xs[(j * 3 + k) * 4 + i]);
  EXPECT_EQ(transpose(x).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(swapaxes(x, 0, 2).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(moveaxis(x, 0, -1).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(to_doubles(moveaxis(x, 0, -1)), to_doubles(transpose(x, {1, 2, 0})));
  EXPECT_THROW(transpose(x, {0, 0, 1}), std::invalid_argument);
  EXPECT_THROW(transpose(x, {0, 1}), std::invalid_argument);
  EXPECT_THROW(swapaxes(x, 0, 3), std::invalid_argument);
}

TEST(Shape, BroadcastExpandSqueezeFlatten) {
  auto x = random_array({3, 1}, float32);
  auto b = broadcast_to(x, {2, 3, 4});
  b.eval();
  EXPECT_EQ(b.strides(), (Strides{0, 1, 0}));
  EXPECT_EQ(b.data_size(), 3u);
  auto xs = to_doubles(x), bs = to_doubles(b);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(bs[i], xs[(i / 4) % 3]);
  EXPECT_THROW(broadcast_to(x, {2, 2}), std::invalid_argument);
  EXPECT_THROW(broadcast_to(x, {1}), std::invalid_argument);
  auto arrs = broadcast_arrays({x, random_array({4}, float32)});
  EXPECT_EQ(arrs[0].shape(), (Shape{3, 4}));
  EXPECT_EQ(arrs[1].shape(), (Shape{3, 4}));
  EXPECT_EQ(expand_dims(x, {0, 3}).shape(), (Shape{1, 3, 1, 1}));
  EXPECT_EQ(expand_dims(x, -1).shape(), (Shape{3, 1, 1}));
  EXPECT_EQ(squeeze(x).shape(), (Shape{3}));
  EXPECT_EQ(squeeze(x, 1).shape(), (Shape{3}));
  EXPECT_THROW(squeeze(x, 0), std::invalid_argument);
  auto y = random_array({2, 3, 4, 5}, float32);
  EXPECT_EQ(flatten(y).shape(), (Shape{120}));
  EXPECT_EQ(flatten(y, 1, 2).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(unflatten(y, 1, {3, 1}).shape(), (Shape{2, 3, 1, 4, 5}));
  EXPECT_EQ(unflatten(y, 3, {-1, 1}).shape(), (Shape{2, 3, 4, 5, 1}));
  EXPECT_THROW(unflatten(y, 1, {2, 2}), std::invalid_argument);
  EXPECT_EQ(flatten(array(1.0f)).shape(), (Shape{1}));
}

TEST(Shape, ContiguousCopiesOnlyWhenNeeded) {
  auto x = random_array({64, 48}, float32);
  auto c = contiguous(x);
  c.eval();
  EXPECT_EQ(c.data<float>(), x.data<float>());
  auto t = contiguous(transpose(x));
  t.eval();
  EXPECT_TRUE(t.flags().row_contiguous);
  EXPECT_EQ(to_doubles(t), to_doubles(transpose(x)));
  auto cm = contiguous(transpose(x), true);
  cm.eval();
  EXPECT_EQ(cm.data<float>(), x.data<float>());
  // strided copies with dtype conversion through astype
  auto h = astype(transpose(x), bfloat16);
  EXPECT_TRUE(all_close(to_doubles(h), to_doubles(transpose(x)), 1e-2, 1e-2));
}

TEST(Creation, FullZerosOnesArange) {
  auto f = full({2, 3}, 7.5f);
  EXPECT_EQ(f.dtype(), float32);
  EXPECT_EQ(to_doubles(f), std::vector<double>(6, 7.5));
  EXPECT_EQ(full({2}, array({1, 2}), float16).dtype(), float16);
  EXPECT_THROW(full({2}, array({1, 2, 3})), std::invalid_argument);
  // Dense, as MLX's: a buffer a NumPy view may write to element by element.
  auto z = zeros({1000, 1000});
  z.eval();
  EXPECT_EQ(z.data_size(), z.size());
  EXPECT_TRUE(z.flags().row_contiguous);
  EXPECT_EQ(to_doubles(ones({3}, int8)), std::vector<double>(3, 1));
  EXPECT_EQ(zeros_like(random_array({2, 2}, int64)).dtype(), int64);
  EXPECT_EQ(to_doubles(arange(5)), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), int32);
  EXPECT_EQ(to_doubles(arange(1, 10, 3)), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(to_doubles(arange(5, 0, -2)), (std::vector<double>{5, 3, 1}));
  EXPECT_EQ(arange(0.0, 1.0, 0.25).size(), 4u);
  EXPECT_EQ(arange(3, 1).size(), 0u);
  EXPECT_THROW(arange(0, 5, 0), std::invalid_argument);
  auto l = linspace(0, 1, 5);
  EXPECT_EQ(to_doubles(l), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(linspace(0, 1, 0).size(), 0u);
  EXPECT_THROW(linspace(0, 1, -1), std::invalid_argument);
}

TEST(Creation, EyeTriTrilTriu) {
  EXPECT_EQ(to_doubles(eye(3)), (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(to_doubles(eye(2, 3, 1)), (std::vector<double>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(to_doubles(identity(2, int32)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(to_doubles(tri(3, 3, 0)), (std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  auto x = random_array({2, 3, 4}, float32);
  auto xs = to_doubles(x);
  auto lo = to_doubles(tril(x, 1)), up = to_doubles(triu(as_transposed(x), -1));
  auto xt = to_doubles(as_transposed(x));
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        int k = (b * 3 + i) * 4 + j;
        EXPECT_EQ(lo[k], j <= i + 1 ? xs[k] : 0);
        EXPECT_EQ(up[k], j >= i - 1 ? xt[k] : 0);
      }
  EXPECT_THROW(tril(array({1.0f})), std::invalid_argument);
}

TEST(Creation, AsTypeAllPairs) {
  auto x = random_array({3, 5}, float32, -100, 100);
  auto xs = to_doubles(x);
  for (Dtype dt : all_dtypes()) {
    auto y = astype(as_transposed(x), dt);
    EXPECT_EQ(y.dtype(), dt);
    auto ys = to_doubles(y);
    for (size_t i = 0; i < xs.size(); ++i) {
      double want = xs[i];
      if (dt == bool_) want = want != 0;
      else if (is_integral(dt)) {
        want = std::trunc(want);
        if (is_unsigned(dt) && want < 0) continue; // wraps (implementation-defined range)
        if (dt == int8 || dt == uint8) continue;   // may overflow
      }
      EXPECT_NEAR(ys[i], want, std::abs(want) * tolerance(dt) * 2) << dt;
    }
  }
}

} // namespace
} // namespace kiln::test
