// GPU sorts against the CPU backend: sort and (stable) argsort of every
// dtype with duplicates, negative values, NaN and -0.0, line lengths across
// the tiles and beyond the largest (sorted runs, merged), along each axis of
// contiguous, transposed, sliced and broadcast inputs; partition and
// argpartition by their contract; complex64 sorts against the CPU.
#include <cmath>
#include <limits>

#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuSort = GpuTest;

std::vector<Dtype> sort_dtypes() {
  std::vector<Dtype> d;
  for (Dtype dt : all_dtypes()) {
    if (dt != complex64) d.push_back(dt);
  }
  return d;
}

// Few distinct values, so lines hold many ties (argsort's order among them
// is the stable one on both devices); negative ones where the dtype has
// them; for floats NaN, -0.0 and +0.0 and infinities mixed in.
array sort_input(const Shape& shape, Dtype dt) {
  if (!issubdtype(dt, floating)) return random_array(shape, dt, -20, 20);
  array x = random_array(shape, float64, -8, 8);
  std::vector<double> v = to_doubles(x);
  double nan = std::numeric_limits<double>::quiet_NaN();
  double inf = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::floor(v[i]) / 2; // ties
    switch (i % 17) {
      case 3: v[i] = nan; break;
      case 5: v[i] = -0.0; break;
      case 8: v[i] = 0.0; break;
      case 11: v[i] = -nan; break; // sign bit set: still last
      case 13: v[i] = i % 2 ? inf : -inf; break;
      default: break;
    }
  }
  return astype(array(v.begin(), shape, float64), dt);
}

using SortFn = array (*)(const array&, int, StreamOrDevice);

::testing::AssertionResult sorts_match(SortFn f, const array& x, int axis) {
  auto fn = [&](const std::vector<array>& v, Device d) {
    return f(v[0], axis, d);
  };
  return same_on_devices(fn, {x}, 0);
}

TEST_F(GpuSort, EveryDtypeLayoutAndAxis) {
  for (Dtype dt : sort_dtypes()) {
    array x = sort_input({37, 53}, dt);
    for (auto& [layout, in] : layouts(x)) {
      for (int axis : {0, 1, -1}) {
        EXPECT_TRUE(sorts_match(sort, in, axis))
            << "sort " << dtype_name(dt) << " " << layout << " " << axis;
        EXPECT_TRUE(sorts_match(argsort, in, axis))
            << "argsort " << dtype_name(dt) << " " << layout << " " << axis;
      }
    }
    array cube = sort_input({5, 33, 6}, dt);
    for (const array& in : {cube, as_transposed(cube)}) {
      for (int axis : {0, 1, 2}) {
        EXPECT_TRUE(sorts_match(sort, in, axis)) << dtype_name(dt);
        EXPECT_TRUE(sorts_match(argsort, in, axis)) << dtype_name(dt);
      }
    }
  }
}

// Lengths around each tile (128, 1024, 4096) and beyond the largest, where
// runs of 4096 are merged (two runs, an odd number, an exact multiple, many
// passes), as rows and as columns.
TEST_F(GpuSort, LineLengths) {
  for (Dtype dt : {float32, float16, bfloat16, float64, int8, uint16, int64,
                   uint64, bool_}) {
    for (int n : {1, 2, 33, 128, 129, 1024, 1025, 4095, 4096, 4097, 10000,
                  12288, 100000}) {
      array rows = sort_input({3, n}, dt);
      array cols = sort_input({n, 2}, dt);
      for (SortFn f : {SortFn(sort), SortFn(argsort)}) {
        EXPECT_TRUE(sorts_match(f, rows, 1)) << dtype_name(dt) << " n " << n;
        EXPECT_TRUE(sorts_match(f, cols, 0)) << dtype_name(dt) << " n " << n;
      }
    }
  }
}

// More lines than a grid dimension's 2^16 (the kernels loop over lines),
// short and long, and a transposed long line.
TEST_F(GpuSort, ManyLines) {
  array x = sort_input({70000, 9}, float32);
  EXPECT_TRUE(sorts_match(sort, x, 1));
  EXPECT_TRUE(sorts_match(argsort, x, 1));
  EXPECT_TRUE(sorts_match(argsort, transpose(x), 0));
  array wide = sort_input({70000, 40}, int32);
  EXPECT_TRUE(sorts_match(sort, wide, 0));
  EXPECT_TRUE(sorts_match(argsort, wide, 0));
  array y = as_transposed(sort_input({9000, 5}, bfloat16));
  EXPECT_TRUE(sorts_match(argsort, y, 0));
  EXPECT_TRUE(sorts_match(sort, y, 0));
}

// -0.0 sorts before +0.0 (the CPU's radix order) and NaNs last whatever
// their sign; all_close cannot see the sign of zero, so compare it.
TEST_F(GpuSort, SignedZerosAndNaNsInPlace) {
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    array x = sort_input({2, 700}, dt);
    array g = sort(x, 1, Device::gpu), c = sort(x, 1, Device::cpu);
    std::vector<double> gv = to_doubles(g), cv = to_doubles(c);
    ASSERT_EQ(gv.size(), cv.size());
    for (size_t i = 0; i < gv.size(); ++i) {
      ASSERT_EQ(std::isnan(gv[i]), std::isnan(cv[i])) << dtype_name(dt) << i;
      if (!std::isnan(gv[i])) {
        ASSERT_EQ(std::signbit(gv[i]), std::signbit(cv[i]))
            << dtype_name(dt) << " " << i;
      }
    }
  }
}

// Equal keys keep their order: the positions of each value ascend.
TEST_F(GpuSort, ArgsortIsStable) {
  array x = random_array({4, 30000}, int32, 0, 3); // merged runs
  array idx = argsort(x, 1, Device::gpu);
  array vals = take_along_axis(x, idx, 1, Device::cpu);
  std::vector<double> v = to_doubles(vals), p = to_doubles(idx);
  for (size_t i = 1; i < v.size(); ++i) {
    if (i % 30000 != 0 && v[i] == v[i - 1]) ASSERT_LT(p[i - 1], p[i]) << i;
  }
}

bool nan_last(double a, double b) {
  return a < b || (std::isnan(b) && !std::isnan(a));
}

// The partition contract on each row of the 2-d row-major `values` (made
// from `x`'s rows, axis last): the multiset is the row's, the kth value is
// the sorted row's kth, nothing before it is larger, nothing after smaller.
::testing::AssertionResult partitioned(const std::vector<double>& values,
                                       const std::vector<double>& x, int n,
                                       int k) {
  for (size_t r = 0; r * n < x.size(); ++r) {
    std::vector<double> got(values.begin() + r * n,
                            values.begin() + (r + 1) * n);
    std::vector<double> want(x.begin() + r * n, x.begin() + (r + 1) * n);
    std::sort(want.begin(), want.end(), nan_last);
    auto same = [](double a, double b) {
      return a == b || (std::isnan(a) && std::isnan(b));
    };
    if (!same(got[k], want[k])) {
      return ::testing::AssertionFailure() << "row " << r << " kth value";
    }
    for (int j = 0; j < n; ++j) {
      if ((j < k && nan_last(got[k], got[j])) ||
          (j > k && nan_last(got[j], got[k]))) {
        return ::testing::AssertionFailure() << "row " << r << " at " << j;
      }
    }
    std::sort(got.begin(), got.end(), nan_last);
    for (int j = 0; j < n; ++j) {
      if (!same(got[j], want[j])) {
        return ::testing::AssertionFailure() << "row " << r << " multiset";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(GpuSort, PartitionContract) {
  for (Dtype dt : {float32, bfloat16, int16, uint32, bool_}) {
    for (int n : {1, 40, 1000, 5000}) {
      array x = sort_input({3, n}, dt);
      for (int axis : {1, 0}) {
        array in = axis == 1 ? x : transpose(x);
        // Rows of x are the lines either way.
        std::vector<double> xv = to_doubles(x);
        for (int kth : {0, n / 2, n - 1, -1}) {
          int k = kth < 0 ? kth + n : kth;
          array p = partition(in, kth, axis, Device::gpu);
          array ap = argpartition(in, kth, axis, Device::gpu);
          EXPECT_EQ(p.dtype(), dt);
          EXPECT_EQ(ap.dtype(), uint32);
          array via = take_along_axis(in, ap, axis, Device::cpu);
          if (axis == 0) {
            p = transpose(p);
            via = transpose(via);
          }
          EXPECT_TRUE(partitioned(to_doubles(p), xv, n, k))
              << "partition " << dtype_name(dt) << " n " << n << " kth " << kth
              << " axis " << axis;
          EXPECT_TRUE(partitioned(to_doubles(via), xv, n, k))
              << "argpartition " << dtype_name(dt) << " n " << n << " kth "
              << kth << " axis " << axis;
          // The positions are a permutation of each line.
          array pos = sort(ap, axis, Device::cpu);
          array want =
              broadcast_to(reshape(arange(0.0, double(n), 1.0, uint32),
                                   axis == 1 ? Shape{1, n} : Shape{n, 1}),
                           in.shape());
          EXPECT_TRUE(all_close(to_doubles(pos), to_doubles(want), 0, 0));
        }
      }
    }
  }
}

TEST_F(GpuSort, EmptyAndTopk) {
  for (Dtype dt : {float32, int64}) {
    EXPECT_TRUE(sorts_match(sort, zeros({0, 4}, dt), 0));
    EXPECT_TRUE(sorts_match(argsort, zeros({3, 0}, dt), 1));
  }
  // topk is a partition then a slice: the k largest, in some order.
  array x = sort_input({6, 300}, float32);
  array t = sort(topk(x, 5, 1, Device::gpu), 1, Device::cpu);
  array want = slice(sort(x, 1, Device::cpu), Shape{0, 295}, Shape{6, 300});
  EXPECT_TRUE(all_close(to_doubles(t), to_doubles(want), 0, 0));
}

// Left and right insertion points of values (with NaN, -0.0 and ties) in
// sorted sequences of every dtype, for values of every layout.
TEST_F(GpuSort, SearchSorted) {
  for (Dtype dt : sort_dtypes()) {
    for (int n : {0, 1, 7, 1000}) {
      array seq = sort(sort_input({n}, dt), 0, Device::cpu);
      array values = sort_input({13, 21}, dt);
      for (auto& [layout, v] : layouts(values)) {
        for (const char* side : {"left", "right"}) {
          auto fn = [&](const std::vector<array>& in, Device d) {
            return searchsorted(in[0], in[1], side, d);
          };
          EXPECT_TRUE(same_on_devices(fn, {seq, v}, 0))
              << dtype_name(dt) << " n " << n << " " << layout << " " << side;
        }
      }
    }
  }
  // A strided sequence and a 0-d value.
  array seq = slice(sort(random_array({40}, float32), 0, Device::cpu), Shape{0},
                    Shape{40}, Shape{3});
  auto fn = [](const std::vector<array>& in, Device d) {
    return searchsorted(in[0], in[1], "right", d);
  };
  EXPECT_TRUE(same_on_devices(fn, {seq, array(0.5f)}, 0));
  EXPECT_TRUE(same_on_devices(fn, {seq, random_array({50}, float32)}, 0));
}

// complex64 is refused by the ops, on the GPU as on the CPU; so is a bad
// axis or kth.
TEST_F(GpuSort, Complex64AsOnTheCpu) {
  // complex64 sorts are no error (as MLX's): compositions of real sorts,
  // ordered by real part, then imaginary part; ties in both parts.
  array re = random_array({6, 41}, int32, -3, 3);
  array im = astype(random_array({6, 41}, int32, -3, 3), float32);
  array z = complex_of(re, im);
  for (auto& [layout, in] : layouts(z)) {
    for (int axis : {0, 1}) {
      EXPECT_TRUE(sorts_match(sort, in, axis)) << layout << " " << axis;
      EXPECT_TRUE(sorts_match(argsort, in, axis)) << layout << " " << axis;
    }
  }
}

TEST_F(GpuSort, ErrorsAsOnTheCpu) {
  array x = random_array({4, 9}, float32);
  EXPECT_THROW(sort(x, 2, Device::gpu), std::invalid_argument);
  EXPECT_THROW(partition(x, 9, 1, Device::gpu), std::invalid_argument);
}

} // namespace
} // namespace kiln::test
