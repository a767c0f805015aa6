// gather, scatter, take, take_along_axis and put_along_axis against
// reference loops, with index arrays of every integer dtype, negative and
// out-of-range indices, and non-contiguous inputs.
#include <cmath>
#include <cstdint>

#include "ops/index_helpers.h"

namespace kiln::test {
namespace {

const std::vector<Dtype>& index_dtypes() {
  static std::vector<Dtype> v = {int8,  int16,  int32,  int64,
                                 uint8, uint16, uint32, uint64};
  return v;
}

// Random indices for an axis of size n: negatives too where the dtype
// allows, and out of range when wide (clamped on reads).
array random_indices(const Shape& shape, Dtype dt, int n, bool wide = false) {
  int lo = is_unsigned(dt) ? 0 : (wide ? -3 * n : -n);
  return random_array(shape, dt, lo, wide ? 2 * n : n);
}

// A read index as the kernels treat it: wrapped once, then clamped.
int64_t read_index(double v, int64_t n, int64_t slice = 1) {
  int64_t i = static_cast<int64_t>(v);
  if (i < 0) i += n;
  return std::clamp<int64_t>(i, 0, n - slice);
}

std::vector<array> layouts(const Shape& shape, Dtype dt) {
  Shape row = shape;
  row[0] = 1;
  return {random_array(shape, dt, -100, 100),
          as_transposed(random_array(shape, dt, -100, 100)),
          broadcast_to(random_array(row, dt, -100, 100), shape)};
}

TEST(Indexing, TakeAlongEveryAxis) {
  Shape shape{4, 5, 6};
  for (Dtype dt : all_dtypes()) {
    for (auto& a : layouts(shape, dt)) {
      Ref r(a);
      for (int axis : {0, 1, 2, -1}) {
        int ax = axis < 0 ? axis + 3 : axis;
        for (Dtype idt : index_dtypes()) {
          bool wide = idt == int32 || idt == int64;
          auto idx = random_indices({2, 3}, idt, shape[ax], wide);
          auto out = take(a, idx, axis);
          Shape want_shape = shape;
          want_shape.erase(want_shape.begin() + ax);
          want_shape.insert(want_shape.begin() + ax, {2, 3});
          ASSERT_EQ(out.shape(), want_shape);
          EXPECT_EQ(out.dtype(), dt);
          Ref ri(idx), ro(out);
          for (size_t i = 0; i < out.size(); ++i) {
            auto o = unravel(i, want_shape);
            std::vector<int64_t> src(o.begin(), o.begin() + ax);
            src.push_back(read_index(ri.at({o[ax], o[ax + 1]}), shape[ax]));
            src.insert(src.end(), o.begin() + ax + 2, o.end());
            ASSERT_EQ(ro.v[i], r.at(src)) << dt << " " << idt << " " << axis;
          }
        }
      }
    }
  }
}

TEST(Indexing, TakeFlatScalarAndEmpty) {
  auto a = as_transposed(random_array({3, 4}, int16, -100, 100));
  auto flat = to_doubles(a);
  auto idx = array({-1, 0, 11, 5, -12}, {5});
  EXPECT_EQ(
      to_doubles(take(a, idx)),
      (std::vector<double>{flat[11], flat[0], flat[11], flat[5], flat[0]}));
  // A 0-d index drops the axis; an int index is a view.
  EXPECT_EQ(take(a, array(2), 1).shape(), (Shape{3}));
  auto row = take(a, -1, 0);
  row.eval();
  EXPECT_EQ(to_doubles(row), std::vector<double>(flat.begin() + 8, flat.end()));
  EXPECT_EQ(row.buffer().ptr, a.buffer().ptr);
  EXPECT_EQ(to_doubles(take(a, 7)), std::vector<double>{flat[7]});
  // Empty index arrays and empty axes.
  EXPECT_EQ(take(a, zeros({0, 2}, int32), 1).shape(), (Shape{3, 0, 2}));
  EXPECT_EQ(take(zeros({0, 3}), zeros({2}, int32), 1).shape(), (Shape{0, 2}));
  EXPECT_EQ(take(zeros({3, 0}), zeros({0}, int32), 1).shape(), (Shape{3, 0}));
  // mlx: take(arange(12).reshape(3, 4), [[0, -1]]) = [[0, 11]].
  EXPECT_EQ(
      to_doubles(take(reshape(arange(12), {3, 4}), array({0, -1}, {1, 2}))),
      (std::vector<double>{0, 11}));
}

TEST(Indexing, GatherSlicesFromBroadcastIndices) {
  Shape shape{4, 5, 6};
  for (auto& a : layouts(shape, float32)) {
    Ref r(a);
    for (Dtype idt : index_dtypes()) {
      auto i0 = random_indices({3, 1}, idt, 4, !is_unsigned(idt));
      auto i2 = random_indices({1, 2}, int8, 6, true);
      Shape slice{2, 5, 3};
      auto out = gather(a, {i0, i2}, {0, -1}, slice);
      ASSERT_EQ(out.shape(), (Shape{3, 2, 2, 5, 3}));
      Ref r0(i0), r2(i2), ro(out);
      for (size_t i = 0; i < out.size(); ++i) {
        auto o = unravel(i, out.shape());
        int64_t b0 = read_index(r0.at({o[0], 0}), 4, 2);
        int64_t b2 = read_index(r2.at({0, o[1]}), 6, 3);
        ASSERT_EQ(ro.v[i], r.at({b0 + o[2], o[3], b2 + o[4]})) << idt;
      }
    }
  }
  // No index arrays: one slice from the origin.
  auto a = random_array({3, 3}, float64);
  EXPECT_EQ(to_doubles(gather(a, std::vector<array>{}, {}, {2, 1})),
            to_doubles(slice(a, {0, 0}, {2, 1})));
  EXPECT_EQ(gather(a, array({1}), 0, {0, 3}).shape(), (Shape{1, 0, 3}));
}

using ScatterFn = array (*)(const array&, const std::vector<array>&,
                            const array&, const std::vector<int>&,
                            StreamOrDevice);

TEST(Indexing, ScatterReductionsApplyInOrder) {
  struct Case {
    ScatterFn fn;
    std::function<double(double, double)> combine;
  };
  std::vector<Case> cases = {
      {scatter, [](double, double u) { return u; }},
      {scatter_add, [](double a, double u) { return a + u; }},
      {scatter_prod, [](double a, double u) { return a * u; }},
      {scatter_max, [](double a, double u) { return std::max(a, u); }},
      {scatter_min, [](double a, double u) { return std::min(a, u); }},
  };
  for (Dtype dt : {int32, int64, uint8, float16, bfloat16, float32, float64}) {
    for (auto& c : cases) {
      auto a = as_transposed(random_array({5, 4}, dt, 1, 4));
      // Duplicates, a negative index and out-of-range ones (dropped).
      auto idx = array({1, -1, 1, 7, 3, -9}, {6}, int16);
      auto upd = random_array({6, 1, 2}, dt, 1, 4);
      auto out = c.fn(a, {idx}, upd, {0}, {});
      Ref ra(a), ru(upd);
      auto want = ra.v;
      std::vector<int64_t> rows{1, 4, 1, -1, 3, -1};
      for (int64_t k = 0; k < 6; ++k) {
        if (rows[k] < 0) continue;
        for (int64_t j = 0; j < 2; ++j) {
          double& w = want[rows[k] * 4 + j];
          w = c.combine(w, ru.at({k, 0, j}));
        }
      }
      EXPECT_TRUE(
          all_close(to_doubles(out), quantize(want, dt), tolerance(dt) * 4, 0))
          << dt;
    }
  }
}

TEST(Indexing, ScatterOverTwoAxesCastsAndDonates) {
  auto a = zeros({4, 5}, int32);
  auto i0 = array({0, 2, 3}, uint32);
  auto i1 = array({3, 0, 4}, int64); // (3, 4) + a 1x2 slice would not fit
  auto upd = astype(reshape(arange(1.0, 7.0, 1.0), {3, 1, 2}), float32);
  auto out = scatter(a, {i0, i1}, upd, {0, 1});
  EXPECT_EQ(out.dtype(), int32);
  std::vector<double> want(20, 0);
  want[0 * 5 + 3] = 1, want[0 * 5 + 4] = 2;
  want[2 * 5 + 0] = 3, want[2 * 5 + 1] = 4;
  EXPECT_EQ(to_doubles(out), want);

  // Donation of a host buffer on the CPU (the GPU's is tested in
  // tests/cuda/gpu_donation_test.cpp).
  auto tmp = random_array({100}, float32);
  auto ptr = tmp.buffer().ptr;
  auto donated =
      scatter_add(tmp, {array({5})}, ones({1, 1}), {0}, Device::cpu);
  tmp = array(0.0f);
  donated.eval();
  EXPECT_EQ(donated.buffer().ptr, ptr);
  // Empty updates leave a as it was.
  auto b = random_array({3}, float32);
  EXPECT_EQ(to_doubles(scatter(b, {zeros({0}, int32)}, zeros({0, 1}), {0})),
            to_doubles(b));
  // NaN wins in scatter_max, as in NumPy's maximum.
  auto m = scatter_max(zeros({2}), {array({1})}, array({NAN}, {1, 1}), {0});
  EXPECT_TRUE(std::isnan(to_doubles(m)[1]));
}

TEST(Indexing, TakeAlongAxis) {
  Shape shape{4, 5, 6};
  for (Dtype dt : {bool_, int8, uint64, float16, bfloat16, float64}) {
    for (auto& a : layouts(shape, dt)) {
      Ref r(a);
      for (Dtype idt : index_dtypes()) {
        for (Shape ishape : {Shape{4, 3, 6}, Shape{1, 7, 6}, Shape{4, 2, 1}}) {
          auto idx = random_indices(ishape, idt, 5, idt == int16);
          auto out = take_along_axis(a, as_transposed(idx), 1);
          Shape want{4, ishape[1], 6};
          ASSERT_EQ(out.shape(), want);
          Ref ri(idx), ro(out);
          for (size_t i = 0; i < out.size(); ++i) {
            auto o = unravel(i, want);
            int64_t j = read_index(ri.at({ishape[0] == 1 ? 0 : o[0], o[1],
                                          ishape[2] == 1 ? 0 : o[2]}),
                                   5);
            ASSERT_EQ(ro.v[i], r.at({o[0], j, o[2]})) << dt << " " << idt;
          }
        }
      }
    }
  }
  // mlx: take_along_axis(a, [[0], [1], [2]], axis=1) on arange(12) (3, 4)
  // = [[0], [5], [10]]; the flattened form indexes the flat array.
  auto m = reshape(arange(12), {3, 4});
  EXPECT_EQ(to_doubles(take_along_axis(m, array({0, 1, 2}, {3, 1}), 1)),
            (std::vector<double>{0, 5, 10}));
  EXPECT_EQ(to_doubles(take_along_axis(m, array({1, 0, 2}))),
            (std::vector<double>{1, 0, 2}));
}

TEST(Indexing, PutAlongAxis) {
  // mlx: put_along_axis(arange(12).reshape(3, 4), [[0], [1], [3]], 100, 1).
  auto m = reshape(arange(12), {3, 4});
  EXPECT_EQ(
      to_doubles(put_along_axis(m, array({0, 1, 3}, {3, 1}), array(100), 1)),
      (std::vector<double>{100, 1, 2, 3, 4, 100, 6, 7, 8, 9, 10, 100}));
  // mlx: put_along_axis(zeros((2, 3)), [[0, 0, 2]], [[1, 2, 3]], axis=1)
  // = [[2, 0, 3], [2, 0, 3]]: indices broadcast over rows, the last wins.
  auto z = zeros({2, 3});
  auto dup = array({0, 0, 2}, {1, 3});
  auto vals3 = array({1.0f, 2.0f, 3.0f}, {1, 3});
  EXPECT_EQ(to_doubles(put_along_axis(z, dup, vals3, 1)),
            (std::vector<double>{2, 0, 3, 2, 0, 3}));
  EXPECT_EQ(to_doubles(scatter_add_axis(z, dup, vals3, 1)),
            (std::vector<double>{3, 0, 3, 3, 0, 3}));
  for (Dtype idt : index_dtypes()) {
    auto a = as_transposed(random_array({4, 5}, float32));
    auto idx = random_indices({4, 3}, idt, 5, true);
    auto vals = random_array({4, 3}, float32);
    auto out = put_along_axis(a, idx, transpose(transpose(vals)), 1);
    Ref ra(a), ri(idx), rv(vals);
    auto want = ra.v;
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t k = 0; k < 3; ++k) {
        int64_t j = static_cast<int64_t>(ri.at({i, k}));
        if (j < 0) j += 5;
        if (j < 0 || j >= 5) continue; // out of range: dropped
        want[i * 5 + j] = rv.at({i, k});
      }
    }
    EXPECT_EQ(to_doubles(out), want) << idt;
  }
}

TEST(Indexing, ExtremeIndicesStayInBounds) {
  auto a = array({10.0f, 11.0f, 12.0f, 13.0f});
  auto big = array({INT64_MIN, INT64_MAX, int64_t(-5), int64_t(4)});
  // Reads clamp (after one wrap), writes out of range are dropped.
  EXPECT_EQ(to_doubles(take(a, big, 0)), (std::vector<double>{10, 13, 10, 13}));
  EXPECT_EQ(to_doubles(take_along_axis(a, big, 0)),
            (std::vector<double>{10, 13, 10, 13}));
  EXPECT_EQ(to_doubles(slice(a, array({INT64_MAX}), {0}, {2})),
            (std::vector<double>{12, 13}));
  auto upd = array({1.0f, 2.0f, 3.0f, 4.0f}, {4, 1});
  EXPECT_EQ(to_doubles(scatter(a, big, upd, 0)), to_doubles(a));
  EXPECT_EQ(to_doubles(put_along_axis(a, big, array(0.0f), 0)), to_doubles(a));
  auto huge = array({UINT64_MAX}, uint64); // reads as -1: the last element
  EXPECT_EQ(to_doubles(take(a, huge, 0)), (std::vector<double>{13}));
}

TEST(Indexing, BadArgumentsRaise) {
  auto a = random_array({3, 4}, float32);
  auto i = array({0, 1});
  EXPECT_TRUE(throws_naming([&] { return take(a, array({0.0f}), 0); }, "take"));
  EXPECT_TRUE(throws_naming([&] { return take(a, array({true}), 0); }, "take"));
  EXPECT_TRUE(throws_naming([&] { return take(a, i, 2); }, "take"));
  EXPECT_TRUE(throws_naming([&] { return take(a, 3, 0); }, "take"));
  EXPECT_TRUE(throws_naming([&] { return take(a, -5, 1); }, "take"));
  EXPECT_TRUE(throws_naming([&] { return take(zeros({0, 2}), i, 0); }, "take"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return gather(a, {i, i, i}, {0, 1, 2}, {1, 1});
      },
      "gather"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return gather(a, {i}, {0, 1}, {1, 1});
      },
      "gather"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return gather(a, {i, i}, {0, 0}, {1, 1});
      },
      "gather"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return gather(a, {i}, {0}, {1, 5});
      },
      "gather"));
  EXPECT_TRUE(
      throws_naming([&] { return gather(a, {i}, {0}, {1}); }, "gather"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return gather(a, {i, array({1, 2, 3})}, {0, 1}, {1, 1});
      },
      "gather"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return gather(a, {array({1.5f})}, {0}, {1, 1});
      },
      "gather"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return scatter(a, {i}, zeros({2, 4}), {0});
      },
      "scatter"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return scatter_add(a, {i}, zeros({3, 1, 4}), {0});
      },
      "scatter_add"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return scatter_prod(a, {i}, zeros({2, 4, 4}), {0});
      },
      "scatter_prod"));
  EXPECT_TRUE(throws_naming(
      [&] {
        auto c = astype(a, complex64);
        return scatter_max(c, {i}, zeros({2, 1, 4}, complex64), {0});
      },
      "scatter_max"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return scatter_min(a, {array({0.0f})}, zeros({1, 1, 4}), {0});
      },
      "scatter_min"));
  EXPECT_TRUE(throws_naming([&] { return take_along_axis(a, i, 0); },
                            "take_along_axis"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return take_along_axis(a, zeros({1, 2}, int32), 0);
      },
      "take_along_axis"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return put_along_axis(a, zeros({3, 2}, int32), zeros({3, 3}), 1);
      },
      "put_along_axis"));
  EXPECT_TRUE(throws_naming(
      [&] {
        return put_along_axis(a, zeros({3, 2}), zeros({3, 2}), 1);
      },
      "put_along_axis"));
}

} // namespace
} // namespace kiln::test
