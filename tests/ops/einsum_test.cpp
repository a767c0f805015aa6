// einsum against a brute-force float64 evaluator (every assignment of every
// label), on contiguous and strided operands, for floats and integers.
#include <map>

#include "linalg_helpers.h"

namespace kiln::test {
namespace {

// Brute force for explicit equations of letters ("ij,jk->ik"); a label of
// size 1 in one operand broadcasts against the others.
std::vector<double> ref_einsum(const std::string& eq,
                               const std::vector<array>& ops) {
  auto arrow = eq.find("->");
  std::vector<std::string> subs{""};
  for (char ch : eq.substr(0, arrow)) {
    if (ch == ',') {
      subs.emplace_back();
    } else {
      subs.back() += ch;
    }
  }
  std::string out = eq.substr(arrow + 2);
  std::map<char, int> size;
  std::vector<std::vector<double>> vals;
  for (size_t i = 0; i < ops.size(); ++i) {
    vals.push_back(to_doubles(ops[i]));
    for (size_t d = 0; d < subs[i].size(); ++d) {
      size[subs[i][d]] = std::max(size[subs[i][d]], ops[i].shape(d));
    }
  }
  std::vector<char> labels;
  for (auto& [l, n] : size) labels.push_back(l);
  size_t out_size = 1;
  for (char l : out) out_size *= size[l];
  std::vector<double> result(out_size, 0.0);
  std::map<char, int> idx;
  for (char l : labels) idx[l] = 0;
  while (true) {
    double prod = 1;
    for (size_t i = 0; i < ops.size(); ++i) {
      int64_t flat = 0;
      for (size_t d = 0; d < subs[i].size(); ++d) {
        int n = ops[i].shape(d);
        flat = flat * n + (n == 1 ? 0 : idx[subs[i][d]]);
      }
      prod *= vals[i][flat];
    }
    size_t o = 0;
    for (char l : out) o = o * size[l] + idx[l];
    result[o] += prod;
    size_t k = labels.size();
    while (k > 0) {
      char l = labels[k - 1];
      if (++idx[l] < size[l]) break;
      idx[l] = 0;
      --k;
    }
    if (k == 0) break;
  }
  return result;
}

void check(const std::string& eq, const std::vector<array>& ops,
           const Shape& shape, double tol = 1e-5) {
  auto got = einsum(eq, ops);
  EXPECT_EQ(got.shape(), shape) << eq;
  EXPECT_TRUE(all_close(to_doubles(got), ref_einsum(eq, ops), tol, tol)) << eq;
}

TEST(Einsum, MatchesBruteForce) {
  auto a = random_array({2, 3}, float32), b = random_array({3, 4}, float32);
  auto c = random_array({4, 5}, float32), sq = random_array({3, 3}, float32);
  check("ij,jk->ik", {a, b}, {2, 4});
  check("ij,jk->ki", {as_transposed(a), sliced_copy(b)}, {4, 2});
  check("ij,jk,kl->il", {a, b, c}, {2, 5});
  check("ij->ji", {a}, {3, 2});
  check("ij->", {a}, {});
  check("ij->j", {reversed(a, 1)}, {3});
  check("i,j->ij", {random_array({3}, float32), random_array({4}, float32)},
        {3, 4});
  check("ij,ij->ij", {a, a}, {2, 3});
  check("ij,ij->", {a, as_transposed(a)}, {});
  check("bij,bjk->bik",
        {random_array({2, 2, 3}, float32), random_array({2, 3, 4}, float32)},
        {2, 2, 4});
  // A batch label of size 1 broadcasts.
  check("bij,bjk->bik",
        {random_array({2, 2, 3}, float32), random_array({1, 3, 4}, float32)},
        {2, 2, 4});
  check("i,i->", {random_array({1}, float32), random_array({3}, float32)}, {});
  // Contracting over several labels at once, and a label summed alone.
  check("ijk,jkl->il",
        {random_array({2, 3, 4}, float64), random_array({3, 4, 2}, float64)},
        {2, 2}, 1e-12);
  check("ij,kl->ik", {a, c}, {2, 4});
  // Repeated labels take diagonals.
  check("ii->i", {sq}, {3});
  check("ii->", {as_transposed(sq)}, {});
  check("iij->ij", {random_array({3, 3, 2}, float32)}, {3, 2});
  check("ii,ij->j", {sq, b}, {4});
  check("ij,jk->ik", {random_array({2, 3}, float64), b}, {2, 4});
}

TEST(Einsum, ImplicitOutputAndEllipsis) {
  auto a = random_array({2, 3}, float32), b = random_array({3, 4}, float32);
  auto implicit = einsum("ij,jk", {a, b});
  EXPECT_TRUE(all_close(to_doubles(implicit), ref_einsum("ij,jk->ik", {a, b}),
                        1e-5, 1e-5));
  // Alphabetical (ASCII) order: 'A' before 'b'.
  EXPECT_EQ(einsum("bA", {a}).shape(), (Shape{3, 2}));
  auto sq = random_array({3, 3}, float32);
  EXPECT_TRUE(all_close(to_doubles(einsum("ii", {sq})),
                        ref_einsum("ii->", {sq}), 1e-5, 1e-5));
  auto x = random_array({5, 2, 3}, float32);
  auto e = einsum("...ij,...jk", {x, b});
  EXPECT_EQ(e.shape(), (Shape{5, 2, 4}));
  EXPECT_TRUE(
      all_close(to_doubles(e), ref_einsum("zij,jk->zik", {x, b}), 1e-5, 1e-5));
  auto e2 = einsum("...ij,...jk->...ik", {random_array({2, 1, 2, 3}, float32),
                                          random_array({4, 3, 2}, float32)});
  EXPECT_EQ(e2.shape(), (Shape{2, 4, 2, 2}));
  // Ellipsis dims missing from the output are summed (as MLX).
  auto s = einsum("...i->i", {a});
  EXPECT_TRUE(all_close(to_doubles(s), ref_einsum("ji->i", {a}), 1e-5, 1e-5));
  EXPECT_EQ(einsum("i...,j...", {random_array({2, 4}, float32),
                                 random_array({3, 1}, float32)})
                .shape(),
            (Shape{4, 2, 3}));
  EXPECT_EQ(einsum("->", {array(3.0f)}).item<float>(), 3.0f);
}

TEST(Einsum, IntegersAndPromotion) {
  auto a = random_array({3, 4}, int32, -5, 5),
       b = random_array({4, 2}, int32, -5, 5);
  auto c = einsum("ij,jk->ik", {a, b});
  EXPECT_EQ(c.dtype(), int32);
  EXPECT_EQ(to_doubles(c), ref_einsum("ij,jk->ik", {a, b}));
  // A diagonal keeps the dtype (as MLX), bool included.
  auto i16 = random_array({3, 3}, int16, -9, 9);
  auto d = einsum("ii->i", {i16});
  EXPECT_EQ(d.dtype(), int16);
  EXPECT_EQ(to_doubles(d), ref_einsum("ii->i", {i16}));
  auto bd = einsum("ii->i", {array({true, false, true, true}, {2, 2})});
  EXPECT_EQ(bd.dtype(), bool_);
  EXPECT_EQ(to_doubles(bd), (std::vector<double>{1, 1}));
  auto h =
      einsum("i,i->i", {random_array({3}, int8), random_array({3}, float16)});
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_EQ(einsum("ij,jk->ik", {random_array({2, 3}, float16),
                                 random_array({3, 2}, bfloat16)})
                .dtype(),
            float32);
}

TEST(Einsum, BadInputs) {
  auto a = random_array({2, 3}, float32), b = random_array({3, 4}, float32);
  const char* op = "einsum";
  EXPECT_TRUE(throws_naming([&] { einsum("ij,jk->ik", {a}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("ij", {a, b}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("i.j", {a}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("i1", {a}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("ij->i->j", {a}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("ij,jk->iz", {a, b}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("ij->ii", {a}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("ijk", {a}); }, op));
  EXPECT_TRUE(throws_naming(
      [&] { einsum("ij...", {random_array({2}, float32)}); }, op));
  EXPECT_TRUE(throws_naming(
      [&] {
        einsum("ij,jk", {a, random_array({4, 4}, float32)});
      },
      op));
  EXPECT_TRUE(throws_naming([&] { einsum("ii", {a}); }, op));
  EXPECT_TRUE(throws_naming([&] { einsum("i......", {a}); }, op));
}

} // namespace
} // namespace kiln::test
