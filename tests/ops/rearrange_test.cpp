// flip, roll, diagonal, diag, trace, unstack, diff, meshgrid and kron
// against index loops over doubles, on strided inputs of every dtype family.
#include <cmath>

#include "ops/index_helpers.h"

namespace kiln::test {
namespace {

std::vector<array> layouts(Dtype dt) {
  double lo = is_unsigned(dt) ? 0 : -9, hi = 9;
  return {random_array({3, 4, 5}, dt, lo, hi),
          as_transposed(random_array({3, 4, 5}, dt, lo, hi)),
          slice(random_array({7, 4, 6}, dt, lo, hi), Shape{6, 0, 1},
                Shape{-8, 4, 6}, Shape{-2, 1, 1})};
}

const std::vector<Dtype> family = {bool_,   int8,     uint16,  int64,
                                   float16, bfloat16, float32, float64};

TEST(Rearrange, FlipAndRoll) {
  for (Dtype dt : family) {
    for (auto& a : layouts(dt)) {
      Ref r(a);
      auto f = flip(a, {0, 2});
      auto rl = roll(a, Shape{4, -1}, {1, 2});
      auto flat = roll(a, 7);
      Ref rf(f), rr(rl), rfl(flat);
      for (size_t i = 0; i < r.v.size(); ++i) {
        auto idx = unravel(i, r.shape);
        auto fi = idx;
        fi[0] = r.shape[0] - 1 - idx[0];
        fi[2] = r.shape[2] - 1 - idx[2];
        EXPECT_EQ(rf.at(idx), r.at(fi)) << dtype_name(dt);
        auto ri = idx;
        ri[1] = ((idx[1] - 4) % 4 + 4) % 4;
        ri[2] = ((idx[2] + 1) % 5 + 5) % 5;
        EXPECT_EQ(rr.at(idx), r.at(ri)) << dtype_name(dt);
        EXPECT_EQ(rfl.v[i], r.v[(i + r.v.size() - 7) % r.v.size()]);
      }
      EXPECT_EQ(to_doubles(flip(flip(a))), r.v);
    }
  }
  EXPECT_TRUE(throws_naming([] { flip(zeros({2, 3}), 2); }, "flip"));
  EXPECT_TRUE(throws_naming(
      [] {
        roll(zeros({2, 3}), Shape{1, 2}, {0, 1, 0});
      },
      "roll"));
  EXPECT_TRUE(throws_naming([] { roll(zeros({2, 3}), 1, 5); }, "roll"));
  // Shifts and axes broadcast, and shifts of one axis add up (NumPy).
  auto r3 = reshape(arange(0, 12, 1), {3, 4});
  EXPECT_EQ(to_doubles(roll(r3, Shape{1, 2}, {1})),
            to_doubles(roll(r3, 3, 1)));
  EXPECT_EQ(to_doubles(roll(r3, Shape{2}, {0, 1})),
            to_doubles(roll(roll(r3, 2, 0), 2, 1)));
}

TEST(Rearrange, DiagonalTraceAndDiag) {
  for (Dtype dt : family) {
    for (auto& a : layouts(dt)) {
      Ref r(a);
      for (int off : {0, 2, -1, -3, 7}) {
        for (auto [ax1, ax2] : {std::pair{0, 1}, {2, 0}, {1, 2}}) {
          auto d = diagonal(a, off, ax1, ax2);
          int other = 3 - ax1 - ax2;
          int64_t n1 = r.shape[ax1], n2 = r.shape[ax2];
          int64_t len = std::max<int64_t>(
              0, off >= 0 ? std::min(n1, n2 - off) : std::min(n1 + off, n2));
          ASSERT_EQ(d.shape(), (Shape{r.shape[other], static_cast<int>(len)}));
          Ref rd(d);
          for (int64_t o = 0; o < r.shape[other]; ++o) {
            for (int64_t i = 0; i < len; ++i) {
              std::vector<int64_t> idx(3);
              idx[other] = o;
              idx[ax1] = off >= 0 ? i : i - off;
              idx[ax2] = off >= 0 ? i + off : i;
              EXPECT_EQ(rd.at({o, i}), r.at(idx)) << dtype_name(dt);
            }
          }
          if (dt == float64 || dt == int64) {
            auto t = trace(a, off, ax1, ax2);
            auto want = to_doubles(sum(d, -1));
            EXPECT_TRUE(all_close(to_doubles(t), want, 1e-12, 1e-12));
          }
        }
      }
    }
  }
  // diag builds a matrix from a vector and reads one back.
  auto v = random_array({4}, int32, -9, 9);
  for (int k : {0, 2, -1}) {
    auto m = diag(v, k);
    ASSERT_EQ(m.shape(), (Shape{4 + std::abs(k), 4 + std::abs(k)}));
    Ref rm(m), rv(v);
    for (int64_t i = 0; i < m.shape(0); ++i) {
      for (int64_t j = 0; j < m.shape(1); ++j) {
        double want = j - i == k ? rv.v[k >= 0 ? i : j] : 0.0;
        EXPECT_EQ(rm.at({i, j}), want);
      }
    }
    EXPECT_EQ(to_doubles(diag(m, k)), rv.v);
  }
  EXPECT_EQ(trace(array({1, 2, 3, 4}, {2, 2}, int8)).dtype(), int32);
  EXPECT_EQ(trace(array({1, 2, 3, 4}, {2, 2}, int8), 0, 0, 1, float32).dtype(),
            float32);
  EXPECT_TRUE(throws_naming([] { diagonal(zeros({3})); }, "diagonal"));
  EXPECT_TRUE(throws_naming(
      [] {
        diagonal(zeros({3, 3}), 0, 1, -1);
      },
      "diagonal"));
  EXPECT_TRUE(throws_naming([] { diag(zeros({2, 2, 2})); }, "diag"));
  EXPECT_TRUE(throws_naming([] { trace(zeros({2})); }, "trace"));
}

TEST(Rearrange, UnstackAndDiff) {
  for (Dtype dt : family) {
    for (auto& a : layouts(dt)) {
      Ref r(a);
      auto parts = unstack(a, 1);
      ASSERT_EQ(parts.size(), 4u);
      for (int64_t j = 0; j < 4; ++j) {
        Ref rp(parts[j]);
        ASSERT_EQ(parts[j].shape(), (Shape{r.shape[0], r.shape[2]}));
        for (size_t i = 0; i < rp.v.size(); ++i) {
          auto idx = unravel(i, rp.shape);
          EXPECT_EQ(rp.v[i], r.at({idx[0], j, idx[1]}));
        }
      }
      if (dt == uint16) continue; // differences wrap around
      for (int n : {0, 1, 2, 6}) {
        auto d = diff(a, n, -1);
        // Reference: repeated differences of each row.
        std::vector<double> want;
        for (size_t row = 0; row < r.v.size() / 5; ++row) {
          std::vector<double> x(r.v.begin() + row * 5,
                                r.v.begin() + row * 5 + 5);
          for (int k = 0; k < n && !x.empty(); ++k) {
            std::vector<double> y;
            for (size_t i = 0; i + 1 < x.size(); ++i) {
              y.push_back(dt == bool_ ? double(x[i + 1] != x[i])
                                      : x[i + 1] - x[i]);
            }
            x = quantize(y, dt); // each step rounds to dt, as the kernel
          }
          want.insert(want.end(), x.begin(), x.end());
        }
        EXPECT_EQ(d.shape(2), std::max(0, 5 - n));
        EXPECT_TRUE(
            all_close(to_doubles(d), want, tolerance(dt), tolerance(dt)))
            << dtype_name(dt) << " n=" << n;
      }
    }
  }
  EXPECT_EQ(diff(array({true, false, false})).dtype(), bool_);
  EXPECT_TRUE(throws_naming([] { diff(zeros({3}), -1); }, "diff"));
  EXPECT_TRUE(throws_naming([] { unstack(zeros({})); }, "unstack"));
}

TEST(Rearrange, MeshgridAndKron) {
  auto x = random_array({3}, float32), y = random_array({4}, int32, -5, 5);
  Ref rx(x), ry(y);
  auto xy = meshgrid({x, y});
  auto ij = meshgrid({x, y}, false, "ij");
  ASSERT_EQ(xy[0].shape(), (Shape{4, 3}));
  ASSERT_EQ(ij[0].shape(), (Shape{3, 4}));
  Ref a(xy[0]), b(xy[1]), c(ij[0]), d(ij[1]);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(a.at({i, j}), rx.v[j]);
      EXPECT_EQ(b.at({i, j}), ry.v[i]);
      EXPECT_EQ(c.at({j, i}), rx.v[j]);
      EXPECT_EQ(d.at({j, i}), ry.v[i]);
    }
  }
  auto sparse = meshgrid({x, y, x}, true, "xy");
  EXPECT_EQ(sparse[0].shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(sparse[1].shape(), (Shape{4, 1, 1}));
  EXPECT_EQ(sparse[2].shape(), (Shape{1, 1, 3}));
  EXPECT_TRUE(throws_naming([&] { meshgrid({x}, false, "yx"); }, "meshgrid"));

  for (Dtype dt : {int16, float32, float64}) {
    auto p = as_transposed(random_array({2, 3}, dt, -4, 4));
    auto q = random_array({4, 2, 2}, dt, -4, 4);
    auto k = kron(p, q);
    ASSERT_EQ(k.shape(), (Shape{4, 4, 6}));
    Ref rp(p), rq(q), rk(k);
    for (size_t i = 0; i < rk.v.size(); ++i) {
      auto idx = unravel(i, k.shape());
      double want = rp.at({idx[1] / 2, idx[2] / 2}) *
                    rq.at({idx[0], idx[1] % 2, idx[2] % 2});
      EXPECT_NEAR(rk.v[i], want, 1e-5 * std::abs(want) + 1e-6);
    }
  }
}

} // namespace
} // namespace kiln::test
