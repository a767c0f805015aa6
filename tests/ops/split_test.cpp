// split: one Split node whose pieces are views of the input (shared buffer,
// the input's strides, the layout facts a slice of the same window gets),
// against a reference loop, for every dtype family, layout and axis, with
// uneven, empty, negative and unsorted cut points.
#include <climits>

#include "kiln/core/layout.h"
#include "kiln/primitives/slicing.h"
#include "ops/index_helpers.h"

namespace kiln::test {
namespace {

// a in four layouts of one shape: row-major, transposed, every other
// element of a larger array, and a row broadcast along axis 0.
std::vector<std::pair<std::string, array>> layouts(const Shape& shape,
                                                   Dtype dt) {
  Shape wide = shape;
  wide.back() *= 2;
  Shape stop = wide, steps(shape.size(), 1);
  steps.back() = 2;
  Shape row = shape;
  row[0] = 1;
  return {
      {"row-major", random_array(shape, dt, -50, 50)},
      {"transposed", as_transposed(random_array(shape, dt, -50, 50))},
      {"sliced", slice(random_array(wide, dt, -50, 50),
                       Shape(shape.size(), 0), stop, steps)},
      {"broadcast", broadcast_to(random_array(row, dt, -50, 50), shape)},
  };
}

// The cut points of one case and the [start, stop) of each piece they give
// on an axis of size n, as NumPy's split defines them.
struct Cut {
  std::string name;
  Shape indices;   // used when parts == 0
  int parts = 0;
};

std::vector<std::pair<int64_t, int64_t>> reference_pieces(const Cut& c,
                                                          int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (c.parts > 0) {
    for (int k = 0; k < c.parts; ++k) {
      out.emplace_back(k * n / c.parts, (k + 1) * n / c.parts);
    }
    return out;
  }
  auto norm = [&](int64_t v) {
    return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n);
  };
  int64_t prev = 0;
  for (size_t k = 0; k <= c.indices.size(); ++k) {
    int64_t lo = norm(prev), hi = k < c.indices.size() ? norm(c.indices[k]) : n;
    out.emplace_back(lo, std::max(lo, hi));
    if (k < c.indices.size()) prev = c.indices[k];
  }
  return out;
}

std::vector<array> apply(const array& a, const Cut& c, int axis) {
  return c.parts > 0 ? split(a, c.parts, axis) : split(a, c.indices, axis);
}

// Piece k matches the reference values and is a view of a with the layout a
// slice of the same window has.
void expect_piece(const array& a, const Ref& ref, int axis, array piece,
                  std::pair<int64_t, int64_t> bounds, const std::string& what) {
  Shape shape = a.shape();
  shape[axis] = static_cast<int>(bounds.second - bounds.first);
  ASSERT_EQ(piece.shape(), shape) << what;
  ASSERT_EQ(piece.dtype(), a.dtype()) << what;
  std::vector<double> want;
  for (size_t i = 0; i < shape_size(shape); ++i) {
    auto idx = unravel(i, shape);
    idx[axis] += bounds.first;
    want.push_back(ref.at(idx));
  }
  EXPECT_EQ(to_doubles(piece), want) << what;
  if (piece.size() == 0) return;
  Shape start(a.ndim(), 0), stop = a.shape();
  start[axis] = static_cast<int>(bounds.first);
  stop[axis] = static_cast<int>(bounds.second);
  array window = slice(a, start, stop);
  eval(window);
  // The layout rule of views (a slice of the whole array is the array
  // itself, so its flags are not a view's).
  auto want_layout = layout_of(shape, a.strides());
  EXPECT_EQ(piece.buffer().ptr, a.buffer().ptr) << what << ": not a view";
  EXPECT_EQ(piece.strides(), a.strides()) << what;
  EXPECT_EQ(piece.offset(), window.offset()) << what;
  EXPECT_EQ(piece.data_size(), want_layout.data_size) << what;
  EXPECT_EQ(piece.flags().contiguous, want_layout.flags.contiguous) << what;
  EXPECT_EQ(piece.flags().row_contiguous, want_layout.flags.row_contiguous)
      << what;
  EXPECT_EQ(piece.flags().col_contiguous, want_layout.flags.col_contiguous)
      << what;
}

TEST(Split, PiecesAreViewsForEveryDtypeLayoutAndAxis) {
  std::vector<Cut> cuts = {
      {"two equal", {}, 2},
      {"uneven", {1, 4}},
      {"empty pieces", {0, 2, 2, 9}},
      {"negative", {-3}},
      {"unsorted", {4, 1}},
  };
  for (Dtype dt : {bool_, int8, uint32, int64, float16, bfloat16, float32,
                   float64, complex64}) {
    for (auto& [lname, a] : layouts({4, 6, 2}, dt)) {
      eval(a);
      Ref ref(a);
      for (int axis = 0; axis < 3; ++axis) {
        for (auto& c : cuts) {
          if (c.parts > 0 && a.shape(axis) % c.parts != 0) continue;
          std::string what = dtype_name(dt) + " " + lname + " axis " +
                             std::to_string(axis) + " " + c.name;
          auto pieces = apply(a, c, axis);
          auto want = reference_pieces(c, a.shape(axis));
          ASSERT_EQ(pieces.size(), want.size()) << what;
          // One node, one output per piece.
          EXPECT_EQ(pieces[0].primitive().name(), std::string("Split"));
          EXPECT_EQ(pieces[0].siblings().size(), pieces.size() - 1);
          eval(pieces);
          for (size_t k = 0; k < pieces.size(); ++k) {
            expect_piece(a, ref, axis, pieces[k], want[k],
                         what + " piece " + std::to_string(k));
          }
        }
      }
    }
  }
}

TEST(Split, NegativeAxisEdgeSizesAndOnePiece) {
  // Negative axis, an axis of one element, an empty array, a 1-d array.
  auto a = random_array({3, 5}, float32);
  auto p = split(a, Shape{2}, -1);
  EXPECT_EQ(p[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(p[1].shape(), (Shape{3, 3}));
  EXPECT_EQ(to_doubles(p[1]), to_doubles(slice(a, {0, 2}, {3, 5})));
  auto one = split(random_array({1, 4}, int32, -9, 9), 1, 0);
  ASSERT_EQ(one.size(), 1u);
  auto e = split(zeros({0, 3}), Shape{0, 0}, 0);
  ASSERT_EQ(e.size(), 3u);
  for (auto& x : e) EXPECT_EQ(x.shape(), (Shape{0, 3}));
  eval(e);
  auto v = arange(7);
  auto q = split(v, Shape{6});
  EXPECT_EQ(to_doubles(q[1]), std::vector<double>{6});
  // One piece is the input itself, as before Split existed.
  EXPECT_TRUE(split(a, Shape{}, 1)[0].is_same(a));
  EXPECT_TRUE(split(a, 1, 1)[0].is_same(a));
}

TEST(Split, ErrorsNameTheOp) {
  auto a = random_array({2, 4}, float32);
  EXPECT_TRUE(throws_naming([&] { return split(a, 3, 1); }, "split"));
  EXPECT_TRUE(throws_naming([&] { return split(a, -1, 1); }, "split"));
  EXPECT_TRUE(throws_naming([&] { return split(a, Shape{1}, 2); }, "split"));
  EXPECT_TRUE(throws_naming([&] { return split(array(1.0f), 1, 0); },
                            "split"));
}

TEST(Split, EquivalenceAndShapes) {
  auto s = default_stream(Device::cpu);
  Split by_count(s, {}, 3, 1), same(s, {}, 3, 1), other_axis(s, {}, 3, 0);
  Split at(s, {2, 4}, 0, 1), at_same(s, {2, 4}, 0, 1), at_other(s, {2, 5}, 0, 1);
  EXPECT_TRUE(by_count.is_equivalent(same));
  EXPECT_FALSE(by_count.is_equivalent(other_axis));
  EXPECT_FALSE(by_count.is_equivalent(at));
  EXPECT_TRUE(at.is_equivalent(at_same));
  EXPECT_FALSE(at.is_equivalent(at_other));
  // Equal parts follow a new axis size; indices stay absolute.
  auto x = zeros({2, 9});
  EXPECT_EQ(by_count.output_shapes({x}),
            (std::vector<Shape>{{2, 3}, {2, 3}, {2, 3}}));
  EXPECT_EQ(at.output_shapes({x}),
            (std::vector<Shape>{{2, 2}, {2, 2}, {2, 5}}));
  EXPECT_THROW(by_count.output_shapes({zeros({2, 8})}), std::invalid_argument);
}

} // namespace
} // namespace kiln::test
