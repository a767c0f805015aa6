// sort, argsort, partition, argpartition and topk against std::sort on
// doubles, along every axis of strided inputs, with NaNs and ties.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/index_helpers.h"

namespace kiln::test {
namespace {

// NaN after everything else, as NumPy.
bool nan_last(double a, double b) {
  return a < b || (std::isnan(b) && !std::isnan(a));
}

// The lines of ref along axis: each as (flat positions, values).
template <typename Fn>
void for_each_line(const Ref& r, int axis, Fn fn) {
  Shape outer = r.shape;
  int n = outer[axis];
  outer[axis] = 1;
  for (size_t l = 0; l < shape_size(outer); ++l) {
    auto idx = unravel(l, outer);
    std::vector<size_t> pos;
    std::vector<double> vals;
    for (int j = 0; j < n; ++j) {
      idx[axis] = j;
      pos.push_back(ravel(idx, r.shape));
      vals.push_back(r.v[pos.back()]);
    }
    fn(pos, vals);
  }
}

std::vector<array> inputs(Dtype dt) {
  double lo = dt == bool_ ? 0 : -6, hi = dt == bool_ ? 2 : 6; // many ties
  if (is_unsigned(dt)) lo = 0;
  auto with_nan = random_array({4, 5, 6}, dt, lo, hi);
  if (is_floating_point(dt)) {
    auto vals = to_doubles(with_nan);
    vals[3] = NAN, vals[17] = INFINITY, vals[40] = -INFINITY, vals[41] = NAN;
    with_nan = array(vals.begin(), {4, 5, 6}, dt);
  }
  return {with_nan, as_transposed(random_array({4, 5, 6}, dt, lo, hi)),
          slice(random_array({8, 5, 7}, dt, lo, hi), Shape{7, 0, 1},
                Shape{-9, 5, 7}, Shape{-2, 1, 1})};
}

bool same(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

TEST(Sort, SortAndArgsortAlongEveryAxis) {
  for (Dtype dt : all_dtypes()) {
    for (auto& a : inputs(dt)) {
      Ref r(a);
      for (int axis : {0, 1, 2, -1}) {
        auto s = sort(a, axis);
        auto as = argsort(a, axis);
        EXPECT_EQ(s.dtype(), dt);
        EXPECT_EQ(as.dtype(), uint32);
        Ref rs(s), ras(as);
        for_each_line(r, axis < 0 ? axis + 3 : axis, [&](auto& pos, auto vals) {
          std::vector<size_t> order(vals.size());
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
            return nan_last(vals[x], vals[y]);
          });
          for (size_t j = 0; j < pos.size(); ++j) {
            ASSERT_TRUE(same(rs.v[pos[j]], vals[order[j]])) << dt;
            // Stable: ties keep their original order.
            ASSERT_EQ(ras.v[pos[j]], order[j]) << dt << " axis " << axis;
          }
        });
      }
      auto flat = sort(a);
      auto want = r.v;
      std::sort(want.begin(), want.end(), nan_last);
      auto got = to_doubles(flat);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_TRUE(same(got[i], want[i]));
      EXPECT_EQ(argsort(a).shape(), (Shape{120}));
    }
  }
}

TEST(Sort, ArgsortIsStableOnLongLines) {
  // Long lines with few distinct values: an unstable sort would reorder
  // ties (short lines are insertion-sorted, which is stable anyway).
  for (Dtype dt : {int8, float16, float32}) {
    auto a = random_array({300, 3}, dt, 0, 4);
    if (is_floating_point(dt)) a = floor(a);
    Ref r(transpose(a));
    Ref got(argsort(transpose(a), 1));
    for_each_line(r, 1, [&](auto& pos, auto vals) {
      std::vector<size_t> order(vals.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t x, size_t y) { return vals[x] < vals[y]; });
      for (size_t j = 0; j < pos.size(); ++j) {
        ASSERT_EQ(got.v[pos[j]], order[j]) << dt;
      }
    });
  }
}

TEST(Sort, LongLinesWithSpecialValues) {
  // Lines this long take the radix path: every dtype, ties, NaN, +-inf and
  // -0 next to +0 (which tie, so argsort keeps their order).
  for (Dtype dt : all_dtypes()) {
    double lo = dt == bool_ ? 0 : (is_unsigned(dt) ? 0 : -100);
    double hi = dt == bool_ ? 2 : 100;
    auto vals = to_doubles(random_array({1000, 2}, dt, lo, hi));
    if (is_floating_point(dt)) {
      for (size_t i : {5, 77, 300, 1001}) vals[i] = NAN;
      // Odd positions form the second line: -0, +0, -0 tie there.
      vals[9] = INFINITY, vals[10] = -INFINITY, vals[11] = -0.0;
      vals[13] = 0.0, vals[15] = -0.0, vals[14] = -1e-3;
    }
    auto a = transpose(array(vals.begin(), {1000, 2}, dt));
    Ref r(a), rs(sort(a, 1)), ras(argsort(a, 1));
    for_each_line(r, 1, [&](auto& pos, auto line) {
      std::vector<size_t> order(line.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return nan_last(line[x], line[y]);
      });
      for (size_t j = 0; j < pos.size(); ++j) {
        ASSERT_TRUE(same(rs.v[pos[j]], line[order[j]])) << dt << " " << j;
        ASSERT_EQ(ras.v[pos[j]], order[j]) << dt << " " << j;
      }
    });
  }
}

TEST(Sort, LinesSplitByTheirTopBits) {
  // Lines of 64Ki elements and more are split by their keys' top bits,
  // then each part is sorted by the rest on whichever core is free: every
  // dtype, one line (parts spread over the cores) and two lines (sorted
  // within one core each), values over a wide range (many parts) and over
  // a few (one part holding most), with ties, NaN, +-inf and -0 next to +0.
  // Float lines without NaN too (their keys' span then picks the parts,
  // and few distinct values are counted).
  const int n = 70001;
  for (Dtype dt : all_dtypes()) {
    for (auto [spread, with_nan] : {std::pair{1e6, true}, std::pair{3.0, true},
                                    std::pair{1e6, false},
                                    std::pair{3.0, false}}) {
      if (!with_nan && !is_floating_point(dt)) continue;
      double lo = dt == bool_ || is_unsigned(dt) ? 0 : -spread;
      double hi = dt == bool_ ? 2 : spread;
      auto vals = to_doubles(random_array({2, n}, dt, lo, hi));
      if (is_floating_point(dt) && !with_nan) {
        if (spread < 10) {
          for (auto& v : vals) v = std::round(v * 4) / 4; // 25 values
        }
      } else if (is_floating_point(dt)) {
        for (size_t i : {5, 777, 30000, 70001 + 9}) vals[i] = NAN;
        vals[9] = INFINITY, vals[10] = -INFINITY, vals[11] = -0.0;
        vals[13] = 0.0, vals[15] = -0.0, vals[n + 1] = -INFINITY;
      }
      auto a = array(vals.begin(), {2, n}, dt);
      for (auto& x : {a, reshape(slice(a, Shape{0, 0}, Shape{1, n}), {n})}) {
        int axis = static_cast<int>(x.ndim()) - 1;
        Ref r(x), rs(sort(x, axis)), ras(argsort(x, axis));
        for_each_line(r, axis, [&](auto& pos, auto line) {
          std::vector<size_t> order(line.size());
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
            return nan_last(line[i], line[j]);
          });
          for (size_t j = 0; j < pos.size(); ++j) {
            ASSERT_TRUE(same(rs.v[pos[j]], line[order[j]]))
                << dt << " spread " << spread << " at " << j;
            ASSERT_EQ(ras.v[pos[j]], order[j])
                << dt << " spread " << spread << " at " << j;
          }
        });
      }
    }
  }
}

TEST(Sort, KeySortedLinesOfEveryLength) {
  // The dtypes sorted by their keys (backend/cpu/key_sorts.h): 16-, 32- and
  // 64-bit ones through the AVX-512 sort where the CPU has it, 16-bit lines
  // of 16384 and more and 8-bit lines of 64 and more by counting. Lengths
  // around 8, 16, 64, 128, 256 and 16384 and past them, rows and strided
  // columns, few distinct values, and for floats NaN, +-inf and -0 next to
  // +0.
  for (Dtype dt : {float32, int32, uint32, float16, bfloat16, int16, uint16,
                   int8, uint8, bool_, float64, int64, uint64}) {
    for (int n : {1, 7, 8, 9, 15, 16, 17, 63, 64, 127, 128, 129, 255, 256,
                  257, 1000, 4099, 16383, 16384, 20000}) {
      if (n > 4099 && dt.size > 2) continue; // counting is 8- and 16-bit
      for (double spread : {1e6, 2.0}) {
        double lo = is_unsigned(dt) || dt == bool_ ? 0 : -spread;
        double hi = dt == bool_ ? 2 : spread;
        auto vals = to_doubles(random_array({3, n}, dt, lo, hi));
        if (is_floating_point(dt)) {
          vals[0] = NAN, vals[n / 2] = INFINITY, vals[n - 1] = -0.0;
          vals[n] = -INFINITY, vals[n + n / 3] = 0.0, vals[2 * n] = NAN;
        }
        auto a = array(vals.begin(), {3, n}, dt);
        for (auto& [x, axis] : {std::pair{a, 1}, std::pair{transpose(a), 0}}) {
          Ref r(x), rs(sort(x, axis));
          for_each_line(r, axis, [&](auto& pos, auto line) {
            std::stable_sort(line.begin(), line.end(), nan_last);
            for (size_t j = 0; j < pos.size(); ++j) {
              ASSERT_TRUE(same(rs.v[pos[j]], line[j]))
                  << dt << " n " << n << " spread " << spread << " at " << j;
            }
          });
        }
      }
    }
  }
}

TEST(Sort, LargeInputsSplitAcrossCores) {
  auto a = random_array({300, 400}, float32, -1000, 1000);
  for (int axis : {0, 1}) {
    Ref r(a), rs(sort(transpose(a), axis));
    Ref rt(transpose(a));
    for_each_line(rt, axis, [&](auto& pos, auto vals) {
      std::sort(vals.begin(), vals.end());
      for (size_t j = 0; j < pos.size(); ++j) ASSERT_EQ(rs.v[pos[j]], vals[j]);
    });
  }
}

TEST(Sort, PartitionProperty) {
  for (Dtype dt : all_dtypes()) {
    for (auto& a : inputs(dt)) {
      Ref r(a);
      for (int axis : {0, 2, -2}) {
        int ax = axis < 0 ? axis + 3 : axis;
        int n = a.shape(ax);
        for (int kth : {0, n / 2, n - 1, -1, -n}) {
          int k = kth < 0 ? kth + n : kth;
          auto p = partition(a, kth, axis);
          auto ap = argpartition(a, kth, axis);
          EXPECT_EQ(p.dtype(), dt);
          EXPECT_EQ(ap.dtype(), uint32);
          Ref rp(p), rap(ap);
          for_each_line(r, ax, [&](auto& pos, auto vals) {
            auto sorted = vals;
            std::sort(sorted.begin(), sorted.end(), nan_last);
            std::vector<double> got, via_idx;
            std::vector<bool> seen(n, false);
            for (size_t j = 0; j < pos.size(); ++j) {
              got.push_back(rp.v[pos[j]]);
              size_t src = static_cast<size_t>(rap.v[pos[j]]);
              ASSERT_LT(src, vals.size());
              ASSERT_FALSE(seen[src]); // a permutation
              seen[src] = true;
              via_idx.push_back(vals[src]);
            }
            for (auto* line : {&got, &via_idx}) {
              ASSERT_TRUE(same((*line)[k], sorted[k])) << dt << " kth " << kth;
              for (int j = 0; j < n; ++j) {
                if (j < k) ASSERT_FALSE(nan_last((*line)[k], (*line)[j]));
                if (j > k) ASSERT_FALSE(nan_last((*line)[j], (*line)[k]));
              }
              auto multiset = *line;
              std::sort(multiset.begin(), multiset.end(), nan_last);
              for (int j = 0; j < n; ++j)
                ASSERT_TRUE(same(multiset[j], sorted[j]));
            }
          });
        }
      }
    }
  }
}

TEST(Sort, TopkMatchesMlx) {
  // Values printed by mlx: topk([3, 1, 4, 1, 5, 9, 2, 6], 3) = [5, 9, 6];
  // topk(arange(20)[::-1], 4) = [16, 19, 17, 18]; partition(..., 3) of the
  // first = [1, 1, 2, 3, 4, 5, 9, 6]. The order within each side is the
  // CPU's selection (as MLX's CPU); the GPU, like MLX's, sorts the line.
  auto x = array({3, 1, 4, 1, 5, 9, 2, 6});
  Device cpu = Device::cpu;
  EXPECT_EQ(to_doubles(topk(x, 3, 0, cpu)), (std::vector<double>{5, 9, 6}));
  EXPECT_EQ(to_doubles(partition(x, 3, 0, cpu)),
            (std::vector<double>{1, 1, 2, 3, 4, 5, 9, 6}));
  auto rev = slice(arange(20), Shape{-1}, Shape{-21}, Shape{-1});
  EXPECT_EQ(to_doubles(topk(rev, 4, 0, cpu)),
            (std::vector<double>{16, 19, 17, 18}));
  EXPECT_EQ(topk(x, 0).size(), 0u);
  EXPECT_EQ(topk(reshape(x, {2, 4}), 2, 1).shape(), (Shape{2, 2}));
  for (Dtype dt : {int8, uint16, float16, bfloat16, float64}) {
    auto a = as_transposed(random_array({6, 9}, dt, 0, 50));
    Ref r(a);
    for (int axis : {0, 1}) {
      int k = axis == 0 ? 4 : 7;
      auto t = topk(a, k, axis);
      Ref rt(t);
      for_each_line(r, axis, [&](auto& pos, auto vals) {
        std::sort(vals.begin(), vals.end());
        std::vector<double> want(vals.end() - k, vals.end());
        std::vector<double> got;
        // pos indexes a; t has k entries along axis at the same outer index.
        auto idx = unravel(pos[0], r.shape);
        for (int j = 0; j < k; ++j) {
          idx[axis] = j;
          got.push_back(rt.at(idx));
        }
        std::sort(got.begin(), got.end());
        ASSERT_EQ(got, want) << dt;
      });
    }
  }
}

TEST(Sort, EmptyAndScalar) {
  EXPECT_EQ(sort(zeros({0, 3}), 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(argsort(zeros({3, 0}), 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(to_doubles(sort(array(2.5f))), (std::vector<double>{2.5}));
  EXPECT_EQ(partition(zeros({0, 3}), 1, 1).shape(), (Shape{0, 3}));
}

TEST(Sort, Complex64OrdersByRealThenImaginaryPart) {
  // As NumPy and MLX. Real parts from few values (ties decided by the
  // imaginary parts, some of those tied too: the stable order keeps them),
  // along both axes of a row-major and a transposed array, against a
  // std::stable_sort of std::complex values.
  std::uniform_int_distribution<int> few(-2, 2);
  std::vector<complex64_t> v;
  for (int i = 0; i < 6 * 9; ++i) {
    v.emplace_back(static_cast<float>(few(rng())),
                   static_cast<float>(few(rng())) / 2);
  }
  array z(v, {6, 9}, complex64);
  for (const array& in : {z, as_transposed(z)}) {
    for (int axis : {0, 1}) {
      int n = in.shape(axis), lines = in.shape(1 - axis);
      auto order = to_doubles(argsort(in, axis));
      auto sorted = contiguous(sort(in, axis));
      auto best = to_doubles(argmax(in, axis));
      auto worst = to_doubles(argmin(in, axis));
      auto top = contiguous(max(in, axis));
      eval({sorted, top});
      for (int l = 0; l < lines; ++l) {
        auto at = [&](int i) { return axis == 0 ? v[i * 9 + l] : v[l * 9 + i]; };
        std::vector<int> want(n);
        std::iota(want.begin(), want.end(), 0);
        std::stable_sort(want.begin(), want.end(),
                         [&](int i, int j) { return complex_before(at(i), at(j)); });
        int hi = 0, lo = 0;
        for (int i = 1; i < n; ++i) {
          if (complex_before(at(hi), at(i))) hi = i;
          if (complex_before(at(i), at(lo))) lo = i;
        }
        for (int i = 0; i < n; ++i) {
          size_t o = axis == 0 ? i * lines + l : l * n + i;
          ASSERT_EQ(order[o], want[i]) << axis << " " << l << " " << i;
          ASSERT_EQ(sorted.data<complex64_t>()[o], at(want[i]));
        }
        EXPECT_EQ(best[l], hi) << axis << " " << l;
        EXPECT_EQ(worst[l], lo) << axis << " " << l;
        EXPECT_EQ(top.data<complex64_t>()[l], at(hi));
      }
    }
  }
}

TEST(Sort, BadArgumentsRaise) {
  auto a = random_array({3, 4}, float32);
  EXPECT_TRUE(throws_naming([&] { return sort(a, 2); }, "sort"));
  EXPECT_TRUE(throws_naming([&] { return sort(array(1.0f), -1); }, "sort"));
  EXPECT_TRUE(throws_naming([&] { return argsort(a, -3); }, "argsort"));
  EXPECT_TRUE(throws_naming([&] { return partition(a, 4, 1); }, "partition"));
  EXPECT_TRUE(throws_naming([&] { return partition(a, -5, 1); }, "partition"));
  EXPECT_TRUE(
      throws_naming([&] { return argpartition(a, 3, 0); }, "argpartition"));
  EXPECT_TRUE(throws_naming([&] { return topk(a, 5, 1); }, "topk"));
  EXPECT_TRUE(throws_naming([&] { return topk(a, -1, 1); }, "topk"));
  EXPECT_TRUE(throws_naming([&] { return topk(a, 1, 2); }, "topk"));
}

} // namespace
} // namespace kiln::test
