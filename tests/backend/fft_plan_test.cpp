// The CPU's FFT plans against a float64 DFT: every length from 1 to 300
// (every radix, the generic odd butterfly, Bluestein past 61), strided
// input and output, in place, both directions; long lengths by their round
// trip and sampled outputs; one plan shared by threads.
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <thread>

#include "kiln/backend/cpu/fft_plan.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

using cf = std::complex<float>;
using cd = std::complex<double>;

std::vector<cf> random_line(int64_t n) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<cf> v(n);
  for (auto& x : v) x = cf(u(rng()), u(rng()));
  return v;
}

// Output k of the DFT of v in double; (j * k) mod n keeps angles exact.
cd dft_at(const std::vector<cf>& v, int64_t k, bool inverse) {
  int64_t n = v.size();
  cd s = 0;
  for (int64_t j = 0; j < n; ++j) {
    double a = (inverse ? 2 : -2) * std::numbers::pi *
               static_cast<double>((j * k) % n) / n;
    s += cd(v[j]) * cd(std::cos(a), std::sin(a));
  }
  return s;
}

double rel_l2(const std::vector<cd>& got, const std::vector<cd>& want) {
  double e = 0, w = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    e += std::norm(got[i] - want[i]);
    w += std::norm(want[i]);
  }
  return std::sqrt(e / std::max(w, 1e-300));
}

TEST(FftPlan, EveryLengthTo300AgainstTheDft) {
  for (int64_t n = 1; n <= 300; ++n) {
    for (bool inverse : {false, true}) {
      auto v = random_line(n);
      auto plan = cpu::fft_plan(n, inverse);
      std::vector<cf> scratch(plan->scratch_size());
      std::vector<cd> want(n);
      for (int64_t k = 0; k < n; ++k) want[k] = dft_at(v, k, inverse);
      // Contiguous, strided (3 in, 2 out) and in place.
      std::vector<cf> out(n), in3(3 * n), out2(2 * n), inplace = v;
      for (int64_t j = 0; j < n; ++j) in3[3 * j] = v[j];
      plan->execute(v.data(), 1, out.data(), 1, scratch.data());
      plan->execute(in3.data(), 3, out2.data(), 2, scratch.data());
      plan->execute(inplace.data(), 1, inplace.data(), 1, scratch.data());
      std::vector<cd> a(n), b(n), c(n);
      for (int64_t k = 0; k < n; ++k) {
        a[k] = out[k], b[k] = out2[2 * k], c[k] = inplace[k];
      }
      EXPECT_LT(rel_l2(a, want), 1e-6) << n << (inverse ? " inverse" : "");
      EXPECT_LT(rel_l2(b, want), 1e-6) << n << " strided";
      EXPECT_LT(rel_l2(c, want), 1e-6) << n << " in place";
    }
  }
}

TEST(FftPlan, LongLengthsRoundTripAndSampledOutputs) {
  // 2^20, 3^10, a prime past the butterflies (Bluestein), and 2 x a prime.
  for (int64_t n : {int64_t(1) << 20, int64_t(59049), int64_t(65537),
                    int64_t(2 * 12289)}) {
    auto v = random_line(n);
    auto fwd = cpu::fft_plan(n, false);
    auto inv = cpu::fft_plan(n, true);
    std::vector<cf> scratch(std::max(fwd->scratch_size(), inv->scratch_size()));
    std::vector<cf> y(n), back(n);
    fwd->execute(v.data(), 1, y.data(), 1, scratch.data());
    inv->execute(y.data(), 1, back.data(), 1, scratch.data());
    std::vector<cd> got(n), want(n);
    for (int64_t j = 0; j < n; ++j) got[j] = cd(back[j]) / double(n), want[j] = v[j];
    EXPECT_LT(rel_l2(got, want), 1e-6) << n;
    // 20 outputs against the DFT in double.
    std::vector<cd> gs, ws;
    for (int64_t k = 0; k < n; k += n / 20 + 1) {
      gs.push_back(y[k]);
      ws.push_back(dft_at(v, k, false));
    }
    EXPECT_LT(rel_l2(gs, ws), 1e-6) << n;
  }
}

TEST(FftPlan, OnePlanSharedByThreads) {
  const int64_t n = 4096;
  auto plan = cpu::fft_plan(n, false);
  EXPECT_EQ(plan.get(), cpu::fft_plan(n, false).get()); // cached
  auto v = random_line(n);
  std::vector<cf> ref(n), s(plan->scratch_size());
  plan->execute(v.data(), 1, ref.data(), 1, s.data());
  std::vector<std::vector<cf>> outs(4, std::vector<cf>(n));
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::vector<cf> scratch(plan->scratch_size());
      for (int r = 0; r < 20; ++r) {
        plan->execute(v.data(), 1, outs[t].data(), 1, scratch.data());
      }
    });
  }
  for (auto& t : ts) t.join();
  for (auto& o : outs) EXPECT_EQ(o, ref);
}

} // namespace
} // namespace kiln::test
