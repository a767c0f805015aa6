// median, minmax, count_nonzero, logcumsumexp, searchsorted, unique, the
// elementwise helpers (trunc, degrees, radians, nan_to_num, real, imag,
// conjugate), vecdot, einsum_path and depends, against float64 references.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <map>
#include <numbers>

#include "ops/index_helpers.h"

namespace kiln::test {
namespace {

std::vector<array> layouts(Dtype dt, double lo = -9, double hi = 9) {
  if (is_unsigned(dt)) lo = 0;
  return {random_array({4, 6}, dt, lo, hi),
          as_transposed(random_array({4, 6}, dt, lo, hi)),
          slice(random_array({8, 7}, dt, lo, hi), Shape{7, 1}, Shape{-9, 7},
                Shape{-2, 1})};
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

TEST(ArrayFunctions, MedianMinmaxCountNonzero) {
  for (Dtype dt : {int8, uint32, int64, float16, float32, float64}) {
    for (auto& a : layouts(dt)) {
      Ref r(a);
      auto m = median(a, 1);
      EXPECT_EQ(m.dtype(), is_inexact(dt) ? dt : float32);
      std::vector<double> want, all = r.v;
      for (int64_t i = 0; i < 4; ++i) {
        std::vector<double> row(r.v.begin() + i * 6, r.v.begin() + i * 6 + 6);
        want.push_back(median_of(row));
      }
      EXPECT_TRUE(all_close(to_doubles(m), want, tolerance(dt), tolerance(dt)));
      EXPECT_NEAR(to_doubles(median(a))[0], median_of(all),
                  4 * tolerance(dt) * 9);
      EXPECT_EQ(median(a, {0, 1}, true).shape(), (Shape{1, 1}));
      auto [lo, hi] = minmax(a, std::vector<int>{0}, true);
      EXPECT_EQ(to_doubles(lo), to_doubles(min(a, 0, true)));
      EXPECT_EQ(to_doubles(hi), to_doubles(max(a, 0, true)));
      auto c = count_nonzero(a, std::vector<int>{1});
      EXPECT_EQ(c.dtype(), int32);
      for (int64_t i = 0; i < 4; ++i) {
        double n = 0;
        for (int j = 0; j < 6; ++j) n += r.v[i * 6 + j] != 0;
        EXPECT_EQ(to_doubles(c)[i], n);
      }
    }
  }
  // NaN anywhere in a line makes its median NaN.
  auto x = array({1.0f, NAN, 3.0f, 2.0f, 5.0f, 4.0f}, {2, 3});
  auto m = to_doubles(median(x, 1));
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 4.0);
  EXPECT_TRUE(throws_naming([] { median(zeros({0, 3}), 0); }, "median"));
  // Complex values order by real part, then imaginary part (as MLX):
  // -1, 3i, 1 + 2i.
  std::vector<complex64_t> c = {{1, 2}, {-1, 0}, {0, 3}};
  auto mc = median(array(c, {3}, complex64));
  EXPECT_EQ(mc.dtype(), complex64);
  EXPECT_EQ(mc.item<complex64_t>(), complex64_t(0, 3));
}

TEST(ArrayFunctions, Logcumsumexp) {
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    for (auto& a : layouts(dt, -30, 30)) {
      Ref r(a);
      for (bool reverse : {false, true}) {
        for (bool inclusive : {true, false}) {
          auto y = logcumsumexp(a, 1, reverse, inclusive);
          std::vector<double> want(r.v.size());
          for (int64_t i = 0; i < 4; ++i) {
            for (int64_t j = 0; j < 6; ++j) {
              double acc = -INFINITY, mx = -INFINITY;
              std::vector<double> terms;
              for (int64_t k = 0; k < 6; ++k) {
                bool in = reverse ? (inclusive ? k >= j : k > j)
                                  : (inclusive ? k <= j : k < j);
                if (in) terms.push_back(r.v[i * 6 + k]);
              }
              for (double t : terms) mx = std::max(mx, t);
              if (!terms.empty()) {
                double s = 0;
                for (double t : terms) s += std::exp(t - mx);
                acc = mx + std::log(s);
              }
              want[i * 6 + j] = acc;
            }
          }
          auto got = to_doubles(y);
          for (size_t k = 0; k < got.size(); ++k) {
            if (std::isinf(want[k])) {
              EXPECT_EQ(got[k], want[k]);
            } else {
              EXPECT_NEAR(got[k], want[k], 4 * tolerance(dt) * 30);
            }
          }
        }
      }
    }
  }
  // Large values do not overflow, integers become float32.
  auto big = logcumsumexp(array({1000.0f, 1000.0f}));
  EXPECT_NEAR(to_doubles(big)[1], 1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(logcumsumexp(array({1, 2})).dtype(), float32);
  // complex64 scans as MLX's (Reduction.Complex64Logcumsumexp has values).
  EXPECT_EQ(logcumsumexp(zeros({2}, complex64)).dtype(), complex64);
}

TEST(ArrayFunctions, Searchsorted) {
  for (Dtype dt : {int8, uint16, int32, float16, float32, float64}) {
    auto seq = sort(random_array({20}, dt, is_unsigned(dt) ? 0 : -9, 9));
    auto base = random_array({5, 6}, dt, is_unsigned(dt) ? 0 : -10, 10);
    for (auto& values : {base, as_transposed(base)}) {
      auto s = to_doubles(seq), v = to_doubles(values);
      auto left = to_doubles(searchsorted(seq, values));
      auto right = to_doubles(searchsorted(seq, values, "right"));
      for (size_t i = 0; i < v.size(); ++i) {
        EXPECT_EQ(left[i],
                  std::lower_bound(s.begin(), s.end(), v[i]) - s.begin());
        EXPECT_EQ(right[i],
                  std::upper_bound(s.begin(), s.end(), v[i]) - s.begin());
      }
    }
    // A strided (reversed twice) sequence reads the same.
    auto strided = flip(flip(seq));
    EXPECT_EQ(to_doubles(searchsorted(strided, base)),
              to_doubles(searchsorted(seq, base)));
  }
  EXPECT_EQ(searchsorted(array({1, 2}), array({1.5f})).dtype(), uint32);
  EXPECT_TRUE(throws_naming(
      [] {
        searchsorted(zeros({2, 2}), zeros({1}));
      },
      "searchsorted"));
  EXPECT_TRUE(throws_naming([] { searchsorted(zeros({2}), zeros({1}), "mid"); },
                            "searchsorted"));
}

// complex64 values with ties in both parts (halves of small integers), -0.0
// and NaN in one part of every 7th value, and their parts as
// std::complex<double>.
std::pair<array, std::vector<std::complex<double>>> complex_ties(int n) {
  auto re = to_doubles(random_array({n}, int32, -3, 3));
  auto im = to_doubles(random_array({n}, int32, -3, 3));
  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::complex<double>> z(n);
  for (int i = 0; i < n; ++i) {
    re[i] /= 2;
    im[i] = i % 5 == 1 ? -0.0 : im[i] / 2;
    if (i % 7 == 3) (i % 2 ? re[i] : im[i]) = nan;
    z[i] = {re[i], im[i]};
  }
  return {complex_of(array(re.begin(), {n}, float32),
                     array(im.begin(), {n}, float32)),
          z};
}

// MLX's order of complex values in a search: by real part, then imaginary
// part, values with a NaN part last and equal to one another.
bool search_before(std::complex<double> x, std::complex<double> y) {
  auto nan = [](std::complex<double> v) {
    return std::isnan(v.real()) || std::isnan(v.imag());
  };
  if (nan(x)) return false;
  return nan(y) || complex_before(x, y);
}

std::vector<std::complex<double>> complex_parts(const array& z) {
  auto re = to_doubles(real(z)), im = to_doubles(imag(z));
  std::vector<std::complex<double>> out;
  for (size_t i = 0; i < re.size(); ++i) out.emplace_back(re[i], im[i]);
  return out;
}

TEST(ArrayFunctions, SearchsortedAndUniqueOfComplex64) {
  auto [seq_unsorted, seq_values] = complex_ties(40);
  auto [values, v] = complex_ties(30);
  array seq = sort(seq_unsorted);
  auto s = complex_parts(seq);
  auto left = to_doubles(searchsorted(seq, values));
  auto right = to_doubles(searchsorted(seq, values, "right"));
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(left[i], std::lower_bound(s.begin(), s.end(), v[i],
                                        search_before) -
                           s.begin())
        << i;
    EXPECT_EQ(right[i], std::upper_bound(s.begin(), s.end(), v[i],
                                         search_before) -
                            s.begin())
        << i;
  }
  // Other layouts: a strided sequence (reversed twice), values transposed
  // (a 5 x 6 view of a 6 x 5 buffer), sliced and broadcast.
  array grid = reshape(values, {5, 6});
  EXPECT_EQ(to_doubles(searchsorted(flip(flip(seq)), values)), left);
  std::vector<array> views = {
      as_transposed(grid),
      slice(grid, Shape{0, 1}, Shape{5, 6}, Shape{2, 2}),
      broadcast_to(slice(grid, Shape{1, 0}, Shape{2, 6}), {4, 6})};
  for (const array& view : views) {
    array copy = contiguous(view);
    EXPECT_EQ(to_doubles(searchsorted(seq, view, "right")),
              to_doubles(searchsorted(seq, copy, "right")));
    auto got = unique(view, 30, false, false, true);
    auto want_view = unique(copy, 30, false, false, true);
    EXPECT_EQ(to_doubles(got[1]), to_doubles(want_view[1]));
  }
  // unique: equal values (0 and -0 alike) merge, each NaN stays its own.
  auto out = unique(values, 30, false, false, true);
  auto sorted = v;
  std::stable_sort(sorted.begin(), sorted.end(), search_before);
  std::vector<std::complex<double>> want;
  std::vector<double> counts;
  for (auto& x : sorted) {
    if (!want.empty() && want.back() == x) {
      ++counts.back();
    } else {
      want.push_back(x);
      counts.push_back(1);
    }
  }
  auto got = complex_parts(out[0]);
  auto got_counts = to_doubles(out[1]);
  for (size_t i = 0; i < want.size(); ++i) {
    auto part = [](double g, double w) {
      return g == w || (std::isnan(g) && std::isnan(w));
    };
    // Values with a NaN part keep their input order, as MLX's.
    bool same = part(got[i].real(), want[i].real()) &&
                part(got[i].imag(), want[i].imag());
    EXPECT_TRUE(same) << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(got_counts[i], counts[i]) << i;
  }
}

TEST(ArrayFunctions, Unique) {
  for (Dtype dt : {bool_, int16, uint8, float32, float64}) {
    auto a = as_transposed(random_array({5, 4}, dt, 0, dt == bool_ ? 2 : 6));
    auto v = to_doubles(a);
    std::map<double, std::pair<size_t, int>> seen; // value -> first, count
    for (size_t i = 0; i < v.size(); ++i) {
      auto it = seen.find(v[i]);
      if (it == seen.end()) {
        seen[v[i]] = {i, 1};
      } else {
        ++it->second.second;
      }
    }
    int k = static_cast<int>(seen.size());
    for (int size : {k, k + 2, std::max(k - 1, 0)}) {
      auto out = unique(a, size, true, true, true);
      auto vals = to_doubles(out[0]), index = to_doubles(out[1]),
           inverse = to_doubles(out[2]), counts = to_doubles(out[3]);
      ASSERT_EQ(vals.size(), static_cast<size_t>(size));
      EXPECT_EQ(out[2].shape(), a.shape());
      int pos = 0;
      for (auto& [value, fc] : seen) {
        if (pos < size) {
          EXPECT_EQ(vals[pos], value);
          EXPECT_EQ(index[pos], fc.first);
          EXPECT_EQ(counts[pos], fc.second);
        }
        ++pos;
      }
      for (int p = k; p < size; ++p) {
        EXPECT_EQ(vals[p], seen.begin()->first); // default fill
        EXPECT_EQ(counts[p], 0);
      }
      for (size_t i = 0; i < v.size(); ++i) {
        int rank =
            static_cast<int>(std::distance(seen.begin(), seen.find(v[i])));
        EXPECT_EQ(inverse[i], std::min(rank, std::max(size - 1, 0)));
      }
    }
  }
  // size 0: empty outputs, and an inverse of zeros.
  auto none = unique(array({3, 1, 3}, {3}), 0, true, true, true);
  EXPECT_EQ(none[0].shape(), (Shape{0}));
  EXPECT_EQ(to_doubles(none[2]), std::vector<double>(3, 0.0));
  auto filled = unique(array({3, 1}), 4, false, false, false, array(7));
  EXPECT_EQ(to_doubles(filled[0]), (std::vector<double>{1, 3, 7, 7}));
  EXPECT_TRUE(throws_naming([] { unique(zeros({2}), -1); }, "unique"));
  EXPECT_TRUE(throws_naming([] { unique(zeros({0}), 2); }, "unique"));
}

TEST(ArrayFunctions, ElementwiseHelpers) {
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    for (auto& a : layouts(dt)) {
      auto v = to_doubles(a);
      EXPECT_EQ(to_doubles(trunc(a)),
                map1(v, [](double x) { return std::trunc(x); }));
      EXPECT_TRUE(all_close(
          to_doubles(degrees(a)),
          map1(v, [](double x) { return x * 180 / std::numbers::pi; }),
          2 * tolerance(dt), tolerance(dt)));
      EXPECT_TRUE(all_close(
          to_doubles(radians(a)),
          map1(v, [](double x) { return x * std::numbers::pi / 180; }),
          2 * tolerance(dt), tolerance(dt)));
    }
  }
  auto ints = random_array({5}, int8, -9, 9);
  EXPECT_EQ(to_doubles(trunc(ints)), to_doubles(ints));
  EXPECT_EQ(degrees(ints).dtype(), float32);
  EXPECT_TRUE(throws_naming([] { trunc(zeros({2}, complex64)); }, "trunc"));

  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    auto x = array({double(NAN), double(INFINITY), -double(INFINITY), 1.5}, dt);
    auto d = to_doubles(nan_to_num(x));
    double big = dt == float16    ? 65504.0
                 : dt == bfloat16 ? 3.3895313892515355e38
                 : dt == float32  ? double(std::numeric_limits<float>::max())
                                  : std::numeric_limits<double>::max();
    EXPECT_EQ(d, (std::vector<double>{0, big, -big, 1.5})) << dtype_name(dt);
    EXPECT_EQ(to_doubles(nan_to_num(x, 2.0f, 3.0f, -4.0f)),
              (std::vector<double>{2, 3, -4, 1.5}));
  }
  EXPECT_TRUE(
      throws_naming([] { nan_to_num(zeros({2}, complex64)); }, "nan_to_num"));

  // Complex parts, against std::complex on random values.
  auto re = random_array({3, 4}, float32), im = random_array({3, 4}, float32);
  auto z = add(astype(re, complex64),
               multiply(astype(im, complex64), array(complex64_t(0, 1))));
  auto zt = transpose(z);
  EXPECT_EQ(real(zt).dtype(), float32);
  EXPECT_EQ(to_doubles(real(zt)), to_doubles(transpose(re)));
  EXPECT_EQ(to_doubles(imag(zt)), to_doubles(transpose(im)));
  EXPECT_EQ(to_doubles(imag(conjugate(zt))),
            to_doubles(negative(transpose(im))));
  EXPECT_EQ(to_doubles(real(conj(zt))), to_doubles(transpose(re)));
  EXPECT_EQ(to_doubles(real(re)), to_doubles(re));
  EXPECT_EQ(to_doubles(imag(re)), std::vector<double>(12, 0.0));
}

TEST(ArrayFunctions, Vecdot) {
  auto a = random_array({3, 5}, float64), b = random_array({5}, float64);
  auto got = to_doubles(vecdot(as_transposed(a), b));
  auto ra = to_doubles(a), rb = to_doubles(b);
  for (int i = 0; i < 3; ++i) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += ra[i * 5 + j] * rb[j];
    EXPECT_NEAR(got[i], s, 1e-12);
  }
  auto col = to_doubles(vecdot(a, reshape(b, {1, 5}), -1));
  EXPECT_TRUE(all_close(col, got, 1e-12, 1e-12));
  // Conjugates the first argument: <1+2i, 1+i> + <3i, 2> = 3-i - 6i.
  auto z = vecdot(array({complex64_t(1, 2), complex64_t(0, 3)}),
                  array({complex64_t(1, 1), complex64_t(2, 0)}));
  eval(z);
  EXPECT_EQ(z.item<complex64_t>(), complex64_t(3, -7));
  EXPECT_TRUE(throws_naming([] { vecdot(zeros({3}), zeros({4})); }, "vecdot"));
}

TEST(ArrayFunctions, EinsumPathAndDepends) {
  auto [path, text] = einsum_path(
      "ab,bc,cd,de->ae",
      {zeros({2, 30}), zeros({30, 4}), zeros({4, 50}), zeros({50, 6})});
  EXPECT_EQ(path, (std::vector<std::vector<int>>{{2, 3}, {0, 1}, {0, 1}}));
  EXPECT_NE(text.find("Naive FLOP count:  288000"), std::string::npos) << text;
  EXPECT_NE(text.find("Optimized FLOP count:  2976"), std::string::npos)
      << text;
  auto single = einsum_path("ii->i", {zeros({3, 3})});
  EXPECT_EQ(single.first, (std::vector<std::vector<int>>{{0}}));
  EXPECT_TRUE(throws_naming(
      [] {
        einsum_path("ij,jk", {zeros({2, 3})});
      },
      "einsum"));

  auto x = random_array({4}, float32), y = random_array({4}, float32);
  auto outs = depends({x}, {y});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(to_doubles(outs[0]), to_doubles(x));
  // Gradients go to the forwarded input only.
  auto g = grad(
      [&](const std::vector<array>& in) {
        return sum(multiply(depends({in[0]}, {in[1]})[0], in[0]));
      },
      std::vector<int>{0, 1})({x, y});
  EXPECT_TRUE(all_close(to_doubles(g[0]), to_doubles(multiply(x, array(2.0f))),
                        1e-6, 1e-6));
  EXPECT_EQ(to_doubles(g[1]), std::vector<double>(4, 0.0));
}

} // namespace
} // namespace kiln::test
