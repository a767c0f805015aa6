// fast::cross_entropy and fast::gated_delta_update against float64 loops
// on random inputs (strided too), for each float dtype, with gradients
// through the harness and clear errors for bad shapes and dtypes.
#include <cmath>

#include "linalg_helpers.h"
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

TEST(FastLosses, CrossEntropyMatchesLogSumExp) {
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    auto logits = random_array({3, 4, 7}, dt, -3, 3);
    auto targets = astype(random_array({3, 4}, int32, 0, 7), int64);
    for (auto& l : {logits, as_transposed(logits), sliced_copy(logits)}) {
      auto lv = quantize(to_doubles(l), dt), tv = to_doubles(targets);
      std::vector<double> want;
      for (int r = 0; r < 12; ++r) {
        double mx = -INFINITY, s = 0;
        for (int c = 0; c < 7; ++c) mx = std::max(mx, lv[r * 7 + c]);
        for (int c = 0; c < 7; ++c) s += std::exp(lv[r * 7 + c] - mx);
        want.push_back(mx + std::log(s) - lv[r * 7 + int(tv[r])]);
      }
      auto got = fast::cross_entropy(l, targets);
      EXPECT_EQ(got.dtype(), float32);
      EXPECT_EQ(got.shape(), (Shape{3, 4}));
      double tol = dt == float32 || dt == float64 ? 1e-5 : 5e-2;
      EXPECT_TRUE(all_close(to_doubles(got), want, tol, tol)) << dt;
    }
  }
  auto l = random_array({4, 5}, float32);
  EXPECT_TRUE(throws_naming([&] { fast::cross_entropy(l, zeros({3}, int32)); },
                            "fast::cross_entropy"));
  EXPECT_TRUE(
      throws_naming([&] { fast::cross_entropy(l, zeros({4}, float32)); },
                    "fast::cross_entropy"));
  EXPECT_TRUE(throws_naming(
      [&] {
        fast::cross_entropy(zeros({4, 5}, int32), zeros({4}, int32));
      },
      "fast::cross_entropy"));
  // The loss is float32 (as MLX) whatever the logits, so its gradient is
  // checked against softmax(logits) - onehot(targets) rather than finite
  // differences.
  auto t = array({0, 4, 2}, {3});
  auto x = random_array({3, 5}, float32);
  auto g =
      grad([t](const array& l) { return sum(fast::cross_entropy(l, t)); })(x);
  auto xv = to_doubles(x);
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    double z = 0;
    for (int c = 0; c < 5; ++c) z += std::exp(xv[r * 5 + c]);
    for (int c = 0; c < 5; ++c) {
      want.push_back(std::exp(xv[r * 5 + c]) / z - (c == to_doubles(t)[r]));
    }
  }
  EXPECT_TRUE(all_close(to_doubles(g), want, 1e-5, 1e-6));
  EXPECT_TRUE(check_vmap(
      [t](const std::vector<array>& in) {
        return fast::cross_entropy(in[0], t);
      },
      {random_array({4, 3, 5}, float64)}, {0}));
}

// The recurrence written out per batch, head and step in float64.
struct DeltaRef {
  std::vector<double> out, state;
};

DeltaRef ref_delta(const array& q, const array& k, const array& v,
                   const array& g, const array& beta, const array& s0,
                   const std::vector<bool>& mask) {
  int B = q.shape(0), T = q.shape(1), Hk = q.shape(2), Dk = q.shape(3);
  int Hv = v.shape(2), Dv = v.shape(3), r = Hv / Hk;
  auto qv = to_doubles(q), kv = to_doubles(k), vv = to_doubles(v);
  auto gv = to_doubles(g), bv = to_doubles(beta);
  DeltaRef ref{std::vector<double>(size_t(B) * T * Hv * Dv, 0.0),
               to_doubles(s0)};
  auto S = [&](int b, int h, int i, int j) -> double& {
    return ref.state[((size_t(b) * Hv + h) * Dv + i) * Dk + j];
  };
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      if (!mask[b * T + t]) continue;
      for (int h = 0; h < Hv; ++h) {
        int hk = h / r;
        const double* kt = &kv[((size_t(b) * T + t) * Hk + hk) * Dk];
        const double* qt = &qv[((size_t(b) * T + t) * Hk + hk) * Dk];
        const double* vt = &vv[((size_t(b) * T + t) * Hv + h) * Dv];
        double gam = gv[(b * T + t) * Hv + h], bet = bv[(b * T + t) * Hv + h];
        for (int i = 0; i < Dv; ++i) {
          double kvm = 0;
          for (int j = 0; j < Dk; ++j) kvm += (S(b, h, i, j) *= gam) * kt[j];
          double d = (vt[i] - kvm) * bet;
          double o = 0;
          for (int j = 0; j < Dk; ++j) {
            S(b, h, i, j) += d * kt[j];
            o += S(b, h, i, j) * qt[j];
          }
          ref.out[((size_t(b) * T + t) * Hv + h) * Dv + i] = o;
        }
      }
    }
  }
  return ref;
}

TEST(FastLosses, GatedDeltaUpdateMatchesRecurrence) {
  int B = 2, T = 5, Hk = 2, Hv = 4, Dk = 6, Dv = 3;
  for (Dtype dt : {float32, float64}) {
    auto q = random_array({B, T, Hk, Dk}, dt, -1, 1);
    auto k = random_array({B, T, Hk, Dk}, dt, -1, 1);
    auto v = random_array({B, T, Hv, Dv}, dt);
    auto g = random_array({B, T, Hv}, dt, 0.5, 1);
    auto beta = random_array({B, T, Hv}, dt, 0, 1);
    auto s0 = random_array({B, Hv, Dv, Dk}, dt);
    std::vector<bool> on(B * T, true);
    for (bool masked : {false, true}) {
      if (masked)
        on = {true, true, false, true, false, true, true, true, true, false};
      std::vector<bool> mv(on.begin(), on.end());
      std::vector<int> mi(mv.begin(), mv.end());
      auto mask = astype(array(mi.begin(), {B, T}, int32), bool_);
      std::optional<array> m =
          masked ? std::optional<array>(mask) : std::nullopt;
      double tol = dt == float32 ? 1e-4 : 1e-10;
      // with and without a starting state; q as a transposed view
      for (bool with_state : {false, true}) {
        auto start = with_state ? s0 : zeros({B, Hv, Dv, Dk}, dt);
        auto ref = ref_delta(q, k, v, g, beta, start, mv);
        auto [out, st] = fast::gated_delta_update(
            as_transposed(q), k, v, g, beta,
            with_state ? std::optional<array>(s0) : std::nullopt, m);
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_EQ(out.shape(), (Shape{B, T, Hv, Dv}));
        EXPECT_EQ(st.shape(), (Shape{B, Hv, Dv, Dk}));
        EXPECT_TRUE(all_close(to_doubles(out), ref.out, tol, tol))
            << dt << " masked " << masked << " state " << with_state;
        EXPECT_TRUE(all_close(to_doubles(st), ref.state, tol, tol));
      }
    }
  }
  auto q = random_array({1, 2, 2, 4}, float32);
  auto v = random_array({1, 2, 3, 4}, float32);
  auto g = random_array({1, 2, 3}, float32);
  EXPECT_TRUE(throws_naming([&] { fast::gated_delta_update(q, q, v, g, g); },
                            "fast::gated_delta_update"));
  EXPECT_TRUE(throws_naming(
      [&] {
        auto v4 = random_array({1, 2, 4, 4}, float32);
        fast::gated_delta_update(q, q, v4, g, g);
      },
      "fast::gated_delta_update"));
  check_transforms("gated_delta_update",
                   [](const std::vector<array>& in) {
                     auto r = fast::gated_delta_update(in[0], in[1], in[2],
                                                       in[3], in[4], in[5]);
                     return add(sum(r.first), sum(square(r.second)));
                   },
                   {random_array({1, 3, 1, 3}, float64, -1, 1),
                    random_array({1, 3, 1, 3}, float64, -1, 1),
                    random_array({1, 3, 2, 2}, float64),
                    random_array({1, 3, 2}, float64, 0.5, 1),
                    random_array({1, 3, 2}, float64, 0, 1),
                    random_array({1, 2, 2, 3}, float64)});
}

} // namespace
} // namespace kiln::test
