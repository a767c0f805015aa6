// segmented_mm against float64 products over each segment's columns of a
// and rows of b, for each floating dtype, on transposed and sliced
// operands, empty, overlapping and out-of-range segments, and its errors.
#include "kiln/ops/utils.h"
#include "linalg_helpers.h"

namespace kiln::test {
namespace {

// out[s] = a[:, start:end] @ b[start:end, :] in float64, bounds clamped
// into [0, K] and an inverted segment empty, as the op reads them.
std::vector<double> ref_segmented(const array& a, const array& b,
                                  const std::vector<int>& seg) {
  int m = a.shape(0), k = a.shape(1), n = b.shape(1);
  auto av = to_doubles(a), bv = to_doubles(b);
  std::vector<double> out;
  for (size_t s = 0; s + 1 < seg.size(); s += 2) {
    int start = std::clamp(seg[s], 0, k), end = std::clamp(seg[s + 1], 0, k);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int l = start; l < end; ++l) acc += av[i * k + l] * bv[l * n + j];
        out.push_back(acc);
      }
    }
  }
  return out;
}

void check(const array& a, const array& b, const std::vector<int>& seg,
           Shape seg_shape, const std::string& what) {
  auto c = segmented_mm(a, b, array(seg, seg_shape, int32));
  Shape want(seg_shape.begin(), seg_shape.end() - 1);
  want.insert(want.end(), {a.shape(0), b.shape(1)});
  EXPECT_EQ(c.shape(), want) << what;
  Dtype dt = c.dtype();
  double t = dt == float16 || dt == bfloat16 ? tolerance(dt) + 2e-2
             : dt == float64                 ? 1e-12
                                             : 1e-5;
  EXPECT_TRUE(all_close(to_doubles(c), ref_segmented(a, b, seg), t, t))
      << what << " " << dt;
}

TEST(SegmentedMM, SegmentsForEachFloatDtype) {
  for (Dtype dt : float_dtypes()) {
    auto a = random_array({5, 12}, dt), b = random_array({12, 7}, dt);
    // A partition, an empty segment, overlapping ones, the whole range.
    check(a, b, {0, 3, 3, 3, 3, 12, 2, 9, 0, 12}, {5, 2}, "mixed");
    check(a, b, {0, 4, 4, 8, 8, 12, 0, 6}, {2, 2, 2}, "2-d segments");
  }
}

TEST(SegmentedMM, LayoutsAndBounds) {
  for (Dtype dt : {float32, float64, float16}) {
    auto at = swapaxes(random_array({12, 5}, dt), 0, 1);
    auto bt = swapaxes(random_array({7, 12}, dt), 0, 1);
    std::vector<int> seg = {0, 5, 5, 12, 1, 11};
    check(at, random_array({12, 7}, dt), seg, {3, 2}, "a transposed");
    check(random_array({5, 12}, dt), bt, seg, {3, 2}, "b transposed");
    check(random_sliced({5, 12}, dt), random_sliced({12, 7}, dt), seg, {3, 2},
          "sliced");
    check(broadcast_to(random_array({1, 12}, dt), {5, 12}),
          random_array({12, 7}, dt), seg, {3, 2}, "broadcast rows");
  }
  // Bounds clamp into [0, K]; an inverted segment is empty (zeros).
  auto a = random_array({3, 6}, float32), b = random_array({6, 4}, float32);
  check(a, b, {-4, 2, 3, 40, 5, 1, 7, 9}, {4, 2}, "clamped and inverted");
  // No segments; an empty inner dimension.
  check(a, b, {}, {0, 2}, "none");
  check(random_array({3, 0}, float32), random_array({0, 4}, float32), {0, 2},
        {1, 2}, "empty K");
}

TEST(SegmentedMM, Errors) {
  auto a = random_array({3, 6}, float32), b = random_array({6, 4}, float32);
  auto seg = array({0, 3}, {1, 2}, int32);
  expect_invalid([&] { segmented_mm(a, random_array({5, 4}, float32), seg); },
                 "segmented_mm", "(M, K) and (K, N)");
  expect_invalid([&] { segmented_mm(random_array({2, 3, 6}, float32), b, seg); },
                 "segmented_mm", "(M, K) and (K, N)");
  expect_invalid([&] { segmented_mm(a, b, array({0, 1, 2}, {3}, int32)); },
                 "segmented_mm", "(..., 2)");
  expect_invalid([&] { segmented_mm(a, b, astype(seg, float32)); },
                 "segmented_mm", "integers");
  expect_invalid(
      [&] { segmented_mm(astype(a, int32), astype(b, int32), seg); },
      "segmented_mm", "real floating");
}

} // namespace
} // namespace kiln::test
