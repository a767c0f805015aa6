// Windows, convolve and hadamard_transform against float64 formulas and
// direct sums, on random inputs; gradients through the harness.
#include <cmath>
#include <numbers>

#include "linalg_helpers.h"
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

std::vector<double> ref_window(const std::string& name, int M) {
  std::vector<double> w;
  const double pi = std::numbers::pi;
  for (int n = 0; n < M; ++n) {
    if (M == 1) {
      w.push_back(1);
      continue;
    }
    double x = 2 * pi * n / (M - 1);
    if (name == "bartlett") {
      w.push_back(1 - std::abs(2.0 * n / (M - 1) - 1));
    } else if (name == "blackman") {
      w.push_back(0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x));
    } else if (name == "hamming") {
      w.push_back(0.54 - 0.46 * std::cos(x));
    } else {
      w.push_back(0.5 - 0.5 * std::cos(x));
    }
  }
  return w;
}

TEST(Signal, WindowsMatchFormulas) {
  std::vector<std::pair<std::string, array (*)(int, StreamOrDevice)>> fns{
      {"bartlett", bartlett},
      {"blackman", blackman},
      {"hamming", hamming},
      {"hanning", hanning}};
  for (auto& [name, fn] : fns) {
    for (int M : {0, 1, 2, 5, 12, 33}) {
      auto w = fn(M, {});
      EXPECT_EQ(w.dtype(), float32);
      EXPECT_EQ(w.shape(), (Shape{M}));
      EXPECT_TRUE(all_close(to_doubles(w), ref_window(name, M), 1e-6, 1e-6))
          << name << " " << M;
    }
    EXPECT_EQ(fn(-3, {}).size(), 0u);
  }
}

std::vector<double> ref_convolve(const std::vector<double>& a,
                                 const std::vector<double>& v) {
  std::vector<double> out(a.size() + v.size() - 1, 0.0);
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < v.size(); ++j) out[i + j] += a[i] * v[j];
  }
  return out;
}

TEST(Signal, ConvolveModes) {
  for (Dtype dt : {float32, float64}) {
    for (auto [n, k] : {std::pair{7, 3}, {8, 4}, {3, 7}, {5, 1}, {6, 6}}) {
      auto a = random_array({n}, dt), v = random_array({k}, dt);
      auto full = ref_convolve(to_doubles(a), to_doubles(v));
      int big = std::max(n, k), small = std::min(n, k);
      // same: the length of the longer, centred; valid: full overlap only
      int lo = (small - 1) / 2;
      std::vector<double> same(full.begin() + lo, full.begin() + lo + big);
      std::vector<double> valid(full.begin() + small - 1, full.begin() + big);
      double tol = tolerance(dt);
      // a reversed (negative-stride) view of the same values too
      for (auto& av : {a, reversed(reversed(a, 0), 0)}) {
        EXPECT_TRUE(all_close(to_doubles(convolve(av, v)), full, tol, tol));
        EXPECT_TRUE(
            all_close(to_doubles(convolve(av, v, "same")), same, tol, tol));
        EXPECT_TRUE(
            all_close(to_doubles(convolve(av, v, "valid")), valid, tol, tol));
      }
      EXPECT_EQ(convolve(a, v).dtype(), dt);
    }
  }
  auto rev = random_array({6}, float32);
  auto got = to_doubles(convolve(reversed(rev, 0), array({1.0f, -1.0f})));
  auto rv = to_doubles(rev);
  std::reverse(rv.begin(), rv.end());
  EXPECT_TRUE(all_close(got, ref_convolve(rv, {1, -1}), 1e-6, 1e-6));
  auto f = random_array({4}, float32);
  EXPECT_TRUE(throws_naming(
      [&] {
        convolve(random_array({2, 2}, float32), f);
      },
      "convolve"));
  EXPECT_TRUE(throws_naming([&] { convolve(f, f, "middle"); }, "convolve"));
  EXPECT_TRUE(throws_naming([&] { convolve(random_array({4}, int32), f); },
                            "convolve"));
  check_transforms(
      "convolve full",
      [](const std::vector<array>& in) { return convolve(in[0], in[1]); },
      {random_array({6}, float64), random_array({3}, float64)});
  check_transforms("convolve same",
                   [](const std::vector<array>& in) {
                     return convolve(in[0], in[1], "same");
                   },
                   {random_array({4}, float64), random_array({5}, float64)});
}

// H[i, j] = (-1)^popcount(i & j), Sylvester's ordering.
std::vector<double> ref_hadamard(const std::vector<double>& x, int n,
                                 double scale) {
  std::vector<double> out(x.size(), 0.0);
  for (size_t r = 0; r < x.size() / n; ++r) {
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) {
        s += (__builtin_popcount(i & j) % 2 ? -1 : 1) * x[r * n + j];
      }
      out[r * n + i] = s * scale;
    }
  }
  return out;
}

TEST(Signal, HadamardTransform) {
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    for (int n : {1, 2, 8, 64}) {
      auto x = random_array({3, n}, dt);
      auto want = ref_hadamard(quantize(to_doubles(x), dt), n,
                               1 / std::sqrt(double(n)));
      double tol = dt == float32 || dt == float64 ? 1e-5 : 2e-2;
      auto y = hadamard_transform(x);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(all_close(to_doubles(y), want, tol, tol)) << dt << " " << n;
      auto yt = hadamard_transform(as_transposed(x), 0.5f);
      EXPECT_TRUE(all_close(to_doubles(yt),
                            ref_hadamard(quantize(to_doubles(x), dt), n, 0.5),
                            tol, tol));
    }
  }
  auto xi = random_array({2, 4}, int32);
  auto yi = hadamard_transform(xi, 1.0f);
  EXPECT_EQ(yi.dtype(), float32);
  EXPECT_EQ(to_doubles(yi), ref_hadamard(to_doubles(xi), 4, 1.0));
  for (int bad : {6, 10, 14, 36, 60}) {
    EXPECT_TRUE(throws_naming(
        [bad] {
          hadamard_transform(random_array({3, bad}, float32));
        },
        "hadamard_transform"));
  }
  // n = m * 2^k, m in (12, 20, 28): H_m is a Hadamard matrix (H H^T = m I)
  // whose first row is MLX's (mlx.core.hadamard_transform(eye(m), 1.0)),
  // and H_n is the Kronecker product H_m (x) H_2^k with Sylvester's factor.
  auto signs = [](const std::string& s) {
    std::vector<double> v;
    for (char c : s) v.push_back(c == '+' ? 1 : -1);
    return v;
  };
  std::vector<std::pair<int, std::string>> first_rows{
      {12, "+-++++++++++"},
      {20, "+----+----++--++-++-"},
      {28, "+------++----++-+--+-+--++--"}};
  for (auto& [m, row] : first_rows) {
    // Row i of the transform of the identity is H e_i: column i of H.
    auto h = to_doubles(transpose(hadamard_transform(eye(m), 1.0f)));
    EXPECT_EQ(std::vector<double>(h.begin(), h.begin() + m), signs(row));
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < m; ++j) {
        EXPECT_EQ(std::abs(h[i * m + j]), 1.0);
        double dot = 0;
        for (int c = 0; c < m; ++c) dot += h[i * m + c] * h[j * m + c];
        EXPECT_EQ(dot, i == j ? m : 0.0) << m;
      }
    }
    for (int p : {2, 8}) {
      int n = m * p;
      auto x = random_array({2, n}, float64);
      auto xv = to_doubles(x);
      std::vector<double> want(xv.size(), 0.0);
      for (int r = 0; r < 2; ++r) {
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < n; ++j) {
            double hp = __builtin_popcount((i % p) & (j % p)) % 2 ? -1 : 1;
            want[r * n + i] += h[(i / p) * m + j / p] * hp * xv[r * n + j];
          }
        }
      }
      EXPECT_TRUE(all_close(to_doubles(hadamard_transform(x, 1.0f)), want,
                            1e-10, 1e-10))
          << n;
    }
  }
  // H_12 is symmetric; its second row, also MLX's
  auto h12 = to_doubles(hadamard_transform(eye(12), 1.0f));
  for (int i = 0; i < 12; ++i) {
    for (int j = 0; j < 12; ++j) EXPECT_EQ(h12[i * 12 + j], h12[j * 12 + i]);
  }
  EXPECT_EQ(std::vector<double>(h12.begin() + 12, h12.begin() + 24),
            signs("--+-+-+-+-+-"));
  check_transforms("hadamard",
                   [](const std::vector<array>& in) {
                     return hadamard_transform(in[0], 0.7f);
                   },
                   {random_array({2, 8}, float64)});
  check_transforms(
      "hadamard 24",
      [](const std::vector<array>& in) { return hadamard_transform(in[0]); },
      {random_array({2, 24}, float64)});
  check_transforms(
      "hadamard 56",
      [](const std::vector<array>& in) { return hadamard_transform(in[0]); },
      {random_array({2, 56}, float64)});
}

} // namespace
} // namespace kiln::test
