// Slices, dynamic slices and slice updates against reference loops, on
// row-major, transposed, broadcast, offset and reversed inputs.
#include <climits>

#include "kiln/primitives/slicing.h"
#include "ops/index_helpers.h"

namespace kiln::test {
namespace {

// One shape in five layouts: row-major, transposed, broadcast from one row,
// a view with an offset into a larger buffer, and a reversed view.
std::vector<array> layouts(const Shape& shape, Dtype dt) {
  std::vector<array> out;
  out.push_back(random_array(shape, dt, -100, 100));
  out.push_back(as_transposed(random_array(shape, dt, -100, 100)));
  Shape row = shape;
  row[0] = 1;
  out.push_back(broadcast_to(random_array(row, dt, -100, 100), shape));
  Shape big = shape, start(shape.size(), 1), stop = shape;
  for (auto& d : big) d += 2;
  for (auto& d : stop) d += 1;
  out.push_back(slice(random_array(big, dt, -100, 100), start, stop));
  size_t nd = shape.size();
  out.push_back(slice(random_array(shape, dt, -100, 100), Shape(nd, -1),
                      Shape(nd, INT_MIN), Shape(nd, -1)));
  return out;
}

// Python's slice(start, stop, step).indices(n), as a list of positions.
std::vector<int64_t> positions(int64_t n, int64_t start, int64_t stop,
                               int64_t step) {
  auto fix = [&](int64_t v) {
    if (v < 0) v += n;
    if (step > 0) return std::min(std::max<int64_t>(v, 0), n);
    return std::min(std::max<int64_t>(v, -1), n - 1);
  };
  std::vector<int64_t> out;
  for (int64_t i = fix(start); step > 0 ? i < fix(stop) : i > fix(stop);
       i += step) {
    out.push_back(i);
  }
  return out;
}

// Values of a[pos[0], pos[1], ...] over the outer product of positions.
std::vector<double> pick(const Ref& a,
                         const std::vector<std::vector<int64_t>>& pos) {
  Shape shape;
  for (auto& p : pos) shape.push_back(static_cast<int>(p.size()));
  std::vector<double> out;
  for (size_t i = 0; i < shape_size(shape); ++i) {
    auto idx = unravel(i, shape);
    for (size_t d = 0; d < idx.size(); ++d) idx[d] = pos[d][idx[d]];
    out.push_back(a.at(idx));
  }
  return out;
}

TEST(Slicing, SliceMatchesReferenceInEveryLayout) {
  std::uniform_int_distribution<int> bound(-8, 8), step(-3, 3);
  Shape shape{5, 6, 4};
  for (Dtype dt : all_dtypes()) {
    for (auto& a : layouts(shape, dt)) {
      Ref ref(a);
      for (int trial = 0; trial < 12; ++trial) {
        Shape st, sp, sd;
        std::vector<std::vector<int64_t>> pos;
        for (int d = 0; d < 3; ++d) {
          int k = 0;
          while (k == 0) k = step(rng());
          st.push_back(bound(rng()));
          sp.push_back(bound(rng()));
          sd.push_back(k);
          pos.push_back(positions(shape[d], st[d], sp[d], k));
        }
        auto out = slice(a, st, sp, sd);
        out.eval();
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_EQ(to_doubles(out), pick(ref, pos)) << dt;
        if (out.size() > 0) EXPECT_EQ(out.buffer().ptr, a.buffer().ptr);
      }
    }
  }
}

TEST(Slicing, SliceNegativeStepsMatchMlx) {
  auto x = arange(10);
  // Values printed by mlx for a[::-1], a[8:2:-2], a[-3:], a[20:], a[-20:3].
  EXPECT_EQ(to_doubles(slice(x, Shape{-1}, Shape{INT_MIN}, Shape{-1})),
            (std::vector<double>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(to_doubles(slice(x, Shape{8}, Shape{2}, Shape{-2})),
            (std::vector<double>{8, 6, 4}));
  EXPECT_EQ(to_doubles(slice(x, {-3}, {10})), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(slice(x, {20}, {30}).size(), 0u);
  EXPECT_EQ(to_doubles(slice(x, {-20}, {3})), (std::vector<double>{0, 1, 2}));
}

// The window's place in its array (shared by the CPU and GPU slice
// kernels): strides scaled by the steps, offset of the first element after
// normalization. a[::-2, 1:5:2] of a (5, 6) array with strides (6, 1)
// starts at (4, 1).
TEST(Slicing, WindowPlace) {
  WindowPlace w = window_place(Shape{5, 6}, Strides{6, 1}, Shape{-1, 1},
                               Shape{INT_MIN, 5}, Shape{-2, 2});
  EXPECT_EQ(w.strides, (Strides{-12, 2}));
  EXPECT_EQ(w.offset, 25);
  // Strided storage (a transposed (5, 6) with strides (1, 5)), clamped
  // starts: a[10:, -20:3] starts at row 5 (an empty window), column 0.
  w = window_place(Shape{5, 6}, Strides{1, 5}, Shape{10, -20}, Shape{12, 3},
                   Shape{1, 1});
  EXPECT_EQ(w.strides, (Strides{1, 5}));
  EXPECT_EQ(w.offset, 5);
}

TEST(Slicing, SliceLayoutFlags) {
  auto a = random_array({4, 5, 6}, float32);
  auto rows = slice(a, {1, 0, 0}, {3, 5, 6});
  rows.eval();
  EXPECT_TRUE(rows.flags().row_contiguous);
  EXPECT_EQ(rows.data_size(), 60u);
  EXPECT_EQ(rows.data<float>(), a.data<float>() + 30);
  auto cols = slice(a, {0, 0, 1}, {4, 5, 3});
  cols.eval();
  EXPECT_FALSE(cols.flags().contiguous);
  auto rev = slice(a, Shape{3, 0, 0}, Shape{INT_MIN, 5, 6}, Shape{-1, 1, 1});
  rev.eval();
  EXPECT_FALSE(rev.flags().row_contiguous);
  EXPECT_EQ(rev.strides()[0], -30);
}

TEST(Slicing, SliceZeroSizeAndScalar) {
  auto s = random_array({}, float32);
  EXPECT_EQ(to_doubles(slice(s, {}, {})), to_doubles(s));
  auto e = random_array({0, 4}, int32);
  EXPECT_EQ(slice(e, {0, 1}, {0, 3}).shape(), (Shape{0, 2}));
  auto a = random_array({3, 4}, int32);
  auto empty = slice(a, {2, 0}, {1, 4});
  EXPECT_EQ(empty.shape(), (Shape{0, 4}));
  EXPECT_TRUE(to_doubles(empty).empty());
}

TEST(Slicing, DynamicSliceClampsAndWraps) {
  Shape shape{6, 7, 5};
  for (Dtype idt : {int8, int16, int32, int64, uint8, uint32}) {
    for (auto& a : layouts(shape, float32)) {
      Ref ref(a);
      for (int s0 : {0, 2, 4, 9, -1, -6, -20}) {
        if (is_unsigned(idt) && s0 < 0) continue;
        int s2 = s0 < 0 ? -2 : 1;
        auto out = slice(a, array({s0, s2}, idt), {0, 2}, {3, 7, 2});
        // Wrap once, then clamp so the window fits.
        auto fix = [](int64_t v, int64_t n, int64_t w) {
          if (v < 0) v += n;
          return std::clamp<int64_t>(v, 0, n - w);
        };
        int64_t b0 = fix(s0, 6, 3), b2 = fix(s2, 5, 2);
        auto want =
            pick(ref, {positions(6, b0, b0 + 3, 1), positions(7, 0, 7, 1),
                       positions(5, b2, b2 + 2, 1)});
        EXPECT_EQ(to_doubles(out), want) << idt << " " << s0;
        EXPECT_EQ(out.buffer().ptr, a.buffer().ptr);
      }
    }
  }
  // A 0-d start for one axis, and mlx's documented example.
  auto m = array({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(to_doubles(slice(m, array(1), {0}, {1, 2})),
            (std::vector<double>{4, 5}));
  EXPECT_EQ(to_doubles(slice(m, array(1), {1}, {2, 1})),
            (std::vector<double>{2, 5}));
}

TEST(Slicing, SliceUpdateMatchesReference) {
  Shape shape{5, 6};
  for (Dtype dt : all_dtypes()) {
    for (auto& src : layouts(shape, dt)) {
      Ref ref(src);
      for (auto [st, sp, sd] : std::vector<std::array<Shape, 3>>{
               {Shape{1, 0}, Shape{4, 6}, Shape{1, 2}},
               {Shape{-1, -2}, Shape{INT_MIN, 0}, Shape{-2, -1}},
               {Shape{0, 5}, Shape{5, 6}, Shape{1, 1}}}) {
        auto p0 = positions(5, st[0], sp[0], sd[0]);
        auto p1 = positions(6, st[1], sp[1], sd[1]);
        Shape window{static_cast<int>(p0.size()), static_cast<int>(p1.size())};
        for (auto& upd : {random_array(window, dt, -50, 50),
                          as_transposed(random_array(window, dt, -50, 50)),
                          random_array({window[1]}, dt, -50, 50)}) {
          auto out = slice_update(src, upd, st, sp, sd);
          auto want = ref.v;
          Ref u(broadcast_to(upd, window));
          for (size_t i = 0; i < p0.size(); ++i) {
            for (size_t j = 0; j < p1.size(); ++j) {
              want[p0[i] * 6 + p1[j]] = u.at({int64_t(i), int64_t(j)});
            }
          }
          EXPECT_EQ(to_doubles(out), want) << dt;
          EXPECT_EQ(to_doubles(src), ref.v); // the source is unchanged
        }
      }
    }
  }
}

TEST(Slicing, SliceUpdateCastsAndDonates) {
  auto src = random_array({4, 3}, int32, -9, 9);
  auto want = to_doubles(src);
  auto out =
      slice_update(src, array({2.7f, -1.5f, 8.2f}), Shape{1, 0}, Shape{2, 3});
  want[3] = 2, want[4] = -1, want[5] = 8; // float -> int truncates
  EXPECT_EQ(out.dtype(), int32);
  EXPECT_EQ(to_doubles(out), want);

  // A source nothing else holds gives its buffer to the result (a host
  // buffer on the CPU; tests/cuda/gpu_donation_test.cpp has the GPU's).
  DefaultDeviceScope cpu(Device::cpu);
  auto tmp = random_array({64}, float32);
  auto ptr = tmp.buffer().ptr;
  auto donated = slice_update(tmp, array(5.0f), Shape{3}, Shape{4});
  tmp = array(0.0f);
  donated.eval();
  EXPECT_EQ(donated.buffer().ptr, ptr);
  EXPECT_EQ(to_doubles(donated)[3], 5.0);
}

TEST(Slicing, DynamicSliceUpdate) {
  auto src = random_array({5, 6, 4}, float32);
  Ref ref(src);
  auto upd = random_array({2, 3, 4}, float32);
  Ref u(upd);
  for (Dtype idt : {int8, int16, int32, int64, uint32}) {
    for (auto [s0, s1] : std::vector<std::pair<int, int>>{{1, 2}, {4, 9}}) {
      auto out =
          slice_update(src, as_transposed(upd), array({s0, s1}, idt), {0, 1});
      int64_t b0 = std::min(s0, 3), b1 = std::min(s1, 3);
      auto want = ref.v;
      for (size_t i = 0; i < upd.size(); ++i) {
        auto idx = unravel(i, upd.shape());
        want[ravel({idx[0] + b0, idx[1] + b1, idx[2]}, src.shape())] =
            u.at(idx);
      }
      EXPECT_EQ(to_doubles(out), want) << idt;
    }
  }
  // mlx: a 0-d update fills the window of size 1 along the axes; an update
  // of lower rank gains leading 1s.
  auto a = array({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  EXPECT_EQ(to_doubles(slice_update(a, array(7), array({1}), {0})),
            (std::vector<double>{0, 1, 2, 3, 7, 7, 7, 7, 8, 9, 10, 11}));
  EXPECT_EQ(to_doubles(slice_update(a, array({7, 8}), array({1}), {0})),
            (std::vector<double>{0, 1, 2, 3, 7, 8, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(to_doubles(slice_update(a, array({7, 8}, {2, 1}), array({1}), {1})),
            (std::vector<double>{0, 7, 2, 3, 4, 8, 6, 7, 8, 9, 10, 11}));
}

TEST(Slicing, AsStrided) {
  auto x = random_array({10}, float64);
  Ref r(x);
  auto w = as_strided(x, {8, 3}, {1, 1}, 0);
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 3; ++j) want.push_back(r.v[i + j]);
  }
  EXPECT_EQ(to_doubles(w), want);
  // Values printed by mlx: a = arange(12).reshape(3, 4);
  // as_strided(a.T, (3,), (1,), 0) = [0, 4, 8], as_strided(a, (2, 2),
  // (1, 4), 1) = [[1, 5], [2, 6]], as_strided(arange(6), (3,), (-1,), 5) =
  // [5, 4, 3].
  auto a = reshape(arange(12), {3, 4});
  EXPECT_EQ(to_doubles(as_strided(transpose(a), {3}, {1}, 0)),
            (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(to_doubles(as_strided(a, {2, 2}, {1, 4}, 1)),
            (std::vector<double>{1, 5, 2, 6}));
  EXPECT_EQ(to_doubles(as_strided(arange(6), {3}, {-1}, 5)),
            (std::vector<double>{5, 4, 3}));
  EXPECT_EQ(as_strided(x, {0, 3}, {1, 1}, 0).size(), 0u);
}

TEST(Slicing, BadArgumentsRaise) {
  auto a = random_array({3, 4}, float32);
  EXPECT_TRUE(throws_naming([&] { return slice(a, {0}, {1}); }, "slice"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice(a, Shape{0, 0}, Shape{1, 1}, Shape{1, 0});
      },
      "slice"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice(a, array({1.0f}), {0}, {1, 4});
      },
      "slice"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice(a, array({1, 2}), {0}, {1, 4});
      },
      "slice"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice(a, array({1}), {0}, {4, 4});
      },
      "slice"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice(a, array({1}), {2}, {1, 4});
      },
      "slice"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice(a, array({1}, {1, 1}), {0}, {1, 4});
      },
      "slice"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice_update(a, zeros({3, 3}), Shape{0, 0}, Shape{2, 4});
      },
      "slice_update"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice_update(a, zeros({1, 5}), array({0}), {0});
      },
      "slice_update"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice_update(a, zeros({2, 1}), array({0}), {2});
      },
      "slice_update"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return slice_update(a, zeros({1, 1, 1}), array({0}), {0});
      },
      "slice_update"));
  EXPECT_TRUE(
      throws_naming([&] { return as_strided(a, {4}, {4}, 0); }, "as_strided"));
  EXPECT_TRUE(
      throws_naming([&] { return as_strided(a, {2}, {-1}, 0); }, "as_strided"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return as_strided(a, {2, 2}, {1}, 0);
      },
      "as_strided"));
}

} // namespace
} // namespace kiln::test
