// gather_mm against float64 products of the picked matrices, for each
// floating dtype, on repeated and unsorted picks, broadcast and
// non-contiguous indices, transposed, sliced and broadcast operands, and
// its argument errors.
#include "kiln/ops/utils.h"
#include "linalg_helpers.h"

namespace kiln::test {
namespace {

// Flat batch indices as int64 values (any integer array).
std::vector<int64_t> flat_indices(const array& idx) {
  std::vector<int64_t> out;
  for (double v : to_doubles(idx)) out.push_back(static_cast<int64_t>(v));
  return out;
}

// a (..., M, K) and b (..., K, N) picked by lhs and rhs (broadcast), in
// float64, with picks read as the op reads them: a negative one from the
// end, then clamped into the batch.
std::vector<double> ref_gather_mm(const array& a, const array& b,
                                  const array& lhs, const array& rhs) {
  int m = a.shape(-2), k = a.shape(-1), n = b.shape(-1);
  Shape batch = detail::broadcast_shapes(lhs.shape(), rhs.shape(), "test");
  auto li = flat_indices(broadcast_to(lhs, batch));
  auto ri = flat_indices(broadcast_to(rhs, batch));
  auto av = to_doubles(a), bv = to_doubles(b);
  int64_t na = av.size() / (m * k), nb = bv.size() / (k * n);
  std::vector<double> out;
  for (size_t p = 0; p < li.size(); ++p) {
    auto read = [](int64_t v, int64_t n) {
      return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n - 1);
    };
    int64_t i = read(li[p], na), j = read(ri[p], nb);
    std::vector<double> ai(av.begin() + i * m * k, av.begin() + (i + 1) * m * k);
    std::vector<double> bj(bv.begin() + j * k * n, bv.begin() + (j + 1) * k * n);
    auto c = ref_matmul(ai, bj, m, k, n);
    out.insert(out.end(), c.begin(), c.end());
  }
  return out;
}

double gmm_tol(Dtype dt, int k) {
  if (dt == float16 || dt == bfloat16) return tolerance(dt) + 1e-3 * k;
  return dt == float64 ? 1e-12 : 1e-5;
}

void check(const array& a, const array& b, const array& lhs, const array& rhs,
           const std::string& what) {
  auto c = gather_mm(a, b, lhs, rhs);
  Shape want = detail::broadcast_shapes(lhs.shape(), rhs.shape(), "test");
  want.insert(want.end(), {a.shape(-2), b.shape(-1)});
  EXPECT_EQ(c.shape(), want) << what;
  double t = gmm_tol(c.dtype(), a.shape(-1));
  EXPECT_TRUE(all_close(to_doubles(c), ref_gather_mm(a, b, lhs, rhs), t, t))
      << what << " " << c.dtype();
}

array idx(std::vector<int> v, Shape shape, Dtype dt = uint32) {
  return astype(array(v, shape, int32), dt);
}

TEST(GatherMM, PicksForEachFloatDtype) {
  for (Dtype dt : float_dtypes()) {
    auto a = random_array({5, 3, 4}, dt), b = random_array({4, 4, 6}, dt);
    // Repeated, unsorted picks: groups of one and of several per matrix.
    check(a, b, idx({4, 0, 2, 2, 1, 3, 0}, {7}), idx({3, 3, 0, 1, 3, 2, 3}, {7}),
          "unsorted");
    check(a, b, idx({0, 1, 2, 3, 4, 0}, {2, 3}), idx({0, 0, 1, 1, 3, 3}, {2, 3}),
          "sorted, 2-d indices");
    // Broadcast indices: (3, 1) with (1, 4) picks 12 products.
    check(a, b, idx({1, 4, 0}, {3, 1}), idx({2, 0, 3, 1}, {1, 4}), "broadcast");
    // Rows of one (decode) and many (prefill).
    check(random_array({6, 1, 32}, dt), random_array({3, 32, 9}, dt),
          idx({0, 1, 2, 3, 4, 5, 5, 4}, {8}), idx({2, 0, 2, 1, 2, 0, 0, 2}, {8}),
          "one row each");
    check(random_array({2, 40, 16}, dt), random_array({3, 16, 24}, dt),
          idx({0, 1, 1}, {3}), idx({2, 2, 0}, {3}), "tall");
  }
}

TEST(GatherMM, DefaultIndicesCoverTheBatch) {
  auto a = random_array({2, 3, 5, 4}, float32);
  auto b = random_array({3, 4, 2}, float32);
  // Only rhs given: lhs is a's batch in order (shape (2, 3)).
  auto ri = idx({2, 0, 1, 1, 2, 0}, {2, 3});
  auto got = gather_mm(a, b, std::nullopt, ri);
  auto li = reshape(arange(0.0, 6.0, uint32), {2, 3});
  EXPECT_TRUE(all_close(to_doubles(got),
                        ref_gather_mm(a, b, li, ri), 1e-5, 1e-5));
  EXPECT_EQ(got.shape(), (Shape{2, 3, 5, 2}));
  // Only lhs given: rhs is b's batch (3), broadcast against lhs (2, 1).
  auto l2 = idx({5, 1}, {2, 1});
  auto r2 = arange(0.0, 3.0, uint32);
  EXPECT_TRUE(all_close(to_doubles(gather_mm(a, b, l2, std::nullopt)),
                        ref_gather_mm(a, b, l2, r2), 1e-5, 1e-5));
  // Neither: matmul.
  auto mm = gather_mm(random_array({3, 5, 4}, float32), b);
  EXPECT_EQ(mm.shape(), (Shape{3, 5, 2}));
}

TEST(GatherMM, NonContiguousOperandsAndIndices) {
  for (Dtype dt : {float32, float16, float64}) {
    auto lhs = idx({2, 0, 1, 1, 2}, {5}), rhs = idx({1, 3, 1, 0, 2}, {5});
    // b stored (E, N, K) and read transposed, as a mixture of experts does.
    auto bt = swapaxes(random_array({4, 6, 8}, dt), -1, -2);
    check(random_array({3, 2, 8}, dt), bt, lhs, rhs, "b transposed");
    check(swapaxes(random_array({3, 8, 2}, dt), -1, -2),
          random_array({4, 8, 6}, dt), lhs, rhs, "a transposed");
    check(random_sliced({3, 2, 8}, dt), random_sliced({4, 8, 6}, dt), lhs, rhs,
          "sliced");
    check(reversed(random_array({3, 2, 8}, dt), 0),
          reversed(random_array({4, 8, 6}, dt), 2), lhs, rhs, "reversed");
    check(broadcast_to(random_array({1, 2, 8}, dt), {3, 2, 8}),
          random_array({4, 8, 6}, dt), lhs, rhs, "broadcast a");
  }
  auto a = random_array({3, 2, 4}, float32), b = random_array({4, 4, 3}, float32);
  // Transposed and int64 / int8 index arrays.
  auto li = transpose(idx({0, 1, 2, 2, 1, 0}, {2, 3}, int64));
  auto ri = transpose(idx({3, 2, 1, 0, 1, 2}, {2, 3}, int8));
  check(a, b, li, ri, "transposed indices");
  check(a, b, reversed(idx({0, 1, 2, 2}, {4}), 0), idx({1}, {1}), "reversed");
}

TEST(GatherMM, VectorsEmptyAndClamped) {
  auto b = random_array({3, 4, 5}, float32);
  auto ri = idx({2, 0, 2}, {3});
  // A 1-d a is one row, removed from the result.
  auto a1 = random_array({4}, float32);
  auto got = gather_mm(a1, b, std::nullopt, ri);
  EXPECT_EQ(got.shape(), (Shape{3, 5}));
  EXPECT_TRUE(all_close(to_doubles(got),
                        ref_gather_mm(reshape(a1, {1, 1, 4}), b,
                                      idx({0}, {1}), ri),
                        1e-5, 1e-5));
  // A 1-d b is one column, removed from the result.
  auto a3 = random_array({3, 2, 4}, float32), bv = random_array({4}, float32);
  auto col = gather_mm(a3, bv, idx({0, 2}, {2}), std::nullopt);
  EXPECT_EQ(col.shape(), (Shape{2, 2}));
  EXPECT_TRUE(all_close(to_doubles(col),
                        ref_gather_mm(a3, reshape(bv, {1, 4, 1}),
                                      idx({0, 2}, {2}), idx({0}, {1})),
                        1e-5, 1e-5));
  // No picks, and an empty inner dimension (zeros).
  auto none = gather_mm(random_array({3, 2, 4}, float32), b,
                        idx({}, {0}), idx({}, {0}));
  EXPECT_EQ(none.shape(), (Shape{0, 2, 5}));
  auto zero_k = gather_mm(random_array({3, 2, 0}, float32),
                          random_array({3, 0, 5}, float32), idx({1, 2}, {2}),
                          idx({0, 0}, {2}));
  for (double v : to_doubles(zero_k)) EXPECT_EQ(v, 0.0);
  // Negative picks count from the end; out-of-range ones read clamped
  // into the batch, as kiln's gathers.
  auto a = random_array({3, 2, 4}, float32);
  check(a, b, idx({7, -1, -2}, {3}, int32), idx({-5, 9, -1}, {3}, int64),
        "negative and clamped");
}

TEST(GatherMM, Errors) {
  auto a = random_array({3, 2, 4}, float32), b = random_array({3, 4, 5}, float32);
  auto i = idx({0, 1}, {2});
  expect_invalid([&] { gather_mm(astype(a, int32), astype(b, int32), i, i); },
                 "gather_mm", "real floating");
  expect_invalid([&] { gather_mm(astype(a, complex64), b, i, i); },
                 "gather_mm", "real floating");
  expect_invalid([&] { gather_mm(a, random_array({3, 5, 4}, float32), i, i); },
                 "gather_mm", "last dimension");
  expect_invalid([&] { gather_mm(a, b, astype(i, float32), i); }, "gather_mm",
                 "lhs_indices must be integers");
  expect_invalid([&] { gather_mm(a, b, i, idx({0, 1, 2}, {3})); }, "gather_mm",
                 "broadcast");
  expect_invalid([&] { gather_mm(random_array({0, 2, 4}, float32), b, i, i); },
                 "gather_mm", "empty batch");
  expect_invalid([&] { gather_mm(array(1.0f), b, i, i); }, "gather_mm",
                 "at least one dimension");
}

} // namespace
} // namespace kiln::test
