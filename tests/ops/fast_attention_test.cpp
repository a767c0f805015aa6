// rope and scaled_dot_product_attention against float64 loops written here,
// for each float dtype and for non-contiguous inputs; the fallback graphs
// must agree with the kernels.
#include <cmath>

#include "kiln/primitives/fast.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

template <typename F>
void expect_invalid(F&& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << "no exception for " << op;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[" + op + "]"), std::string::npos)
        << e.what();
  }
}

array fallback_of(const array& y) {
  auto& p = dynamic_cast<fast::Custom&>(y.primitive());
  return p.fallback()(y.inputs())[0];
}

// Checks a fast op's result and its fallback's against a reference.
void check(const array& y, const std::vector<double>& want, double tol,
           const std::string& what) {
  auto fb = fallback_of(y);
  EXPECT_TRUE(all_close(to_doubles(y), want, tol, tol)) << what;
  EXPECT_TRUE(all_close(to_doubles(fb), want, tol, tol)) << "fallback " << what;
}

// ---- rope
// ---------------------------------------------------------------------

std::vector<double> rope_ref(const std::vector<double>& x, const Shape& shape,
                             int dims, bool traditional, double base,
                             double scale, const std::vector<double>& offsets,
                             const std::vector<double>* freqs) {
  int D = shape.back(), T = shape[shape.size() - 2], half = dims / 2;
  size_t rows = x.size() / D, per_batch = rows / shape[0];
  std::vector<double> out = x;
  for (size_t r = 0; r < rows; ++r) {
    double off = offsets.size() == 1 ? offsets[0] : offsets[r / per_batch];
    double pos = (static_cast<double>(r % T) + off) * scale;
    for (int j = 0; j < half; ++j) {
      double inv = freqs ? 1 / (*freqs)[j] : std::pow(base, -2.0 * j / dims);
      double c = std::cos(pos * inv), s = std::sin(pos * inv);
      int i1 = traditional ? 2 * j : j, i2 = traditional ? 2 * j + 1 : j + half;
      double x1 = x[r * D + i1], x2 = x[r * D + i2];
      out[r * D + i1] = x1 * c - x2 * s;
      out[r * D + i2] = x1 * s + x2 * c;
    }
  }
  return out;
}

TEST(RoPE, MatchesFloat64) {
  for (Dtype dt : float_dtypes()) {
    double tol = tolerance(dt) * 8;
    for (bool traditional : {false, true}) {
      for (int dims : {8, 4}) {
        auto x = random_array({2, 3, 5, 8}, dt);
        auto xs = to_doubles(x);
        auto y = fast::rope(x, dims, traditional, 10000.0f, 1.0f, 3);
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_EQ(y.shape(), x.shape());
        check(
            y,
            rope_ref(xs, x.shape(), dims, traditional, 10000, 1, {3}, nullptr),
            tol, "rope " + dtype_name(dt));
        // Transposed input, another base and scale, per-batch offsets.
        auto xt = as_transposed(x);
        auto off = array({2, 7});
        auto yt = fast::rope(xt, dims, traditional, 500.0f, 0.5f, off);
        check(yt,
              rope_ref(xs, x.shape(), dims, traditional, 500, 0.5, {2, 7},
                       nullptr),
              tol, "rope per-batch " + dtype_name(dt));
      }
    }
  }
}

TEST(RoPE, FreqsAndOtherRanks) {
  auto freqs = array({1.0f, 3.0f, 10.0f});
  auto fs = to_doubles(freqs);
  auto x3 = random_array({2, 4, 6}, float32); // (B, T, D)
  auto y3 = fast::rope(x3, 6, false, std::nullopt, 1.0f, 1, freqs);
  check(y3, rope_ref(to_doubles(x3), x3.shape(), 6, false, 0, 1, {1}, &fs),
        1e-5, "freqs, 3-d");
  auto x5 = random_array({2, 2, 3, 4, 6}, float32);
  auto y5 = fast::rope(x5, 4, true, 10000.0f, 2.0f, array(int64_t(5)));
  check(y5,
        rope_ref(to_doubles(x5), x5.shape(), 4, true, 10000, 2, {5}, nullptr),
        1e-5, "5-d");
  // A broadcast (stride 0) input.
  auto row = random_array({1, 1, 1, 8}, float32);
  auto xb = broadcast_to(row, {2, 2, 3, 8});
  check(fast::rope(xb, 8, false, 10000.0f, 1.0f, 0),
        rope_ref(to_doubles(xb), xb.shape(), 8, false, 10000, 1, {0}, nullptr),
        1e-5, "broadcast");
  auto e = fast::rope(zeros({0, 2, 3, 4}), 4, false, 10000.0f, 1.0f, 0);
  EXPECT_TRUE(to_doubles(e).empty());
}

TEST(RoPE, BadArguments) {
  auto x = zeros({1, 2, 3, 8});
  expect_invalid(
      [&] {
        fast::rope(zeros({3, 8}), 8, false, 1e4f, 1, 0);
      },
      "rope");
  expect_invalid(
      [&] {
        fast::rope(zeros({1, 3, 8}, int32), 8, false, 1e4f, 1, 0);
      },
      "rope");
  expect_invalid([&] { fast::rope(x, 7, false, 1e4f, 1, 0); }, "rope");
  expect_invalid([&] { fast::rope(x, 10, false, 1e4f, 1, 0); }, "rope");
  expect_invalid([&] { fast::rope(x, 0, false, 1e4f, 1, 0); }, "rope");
  expect_invalid(
      [&] {
        fast::rope(x, 8, false, 1e4f, 1, 0, array({1.f, 2.f, 3.f, 4.f}));
      },
      "rope");
  expect_invalid([&] { fast::rope(x, 8, false, std::nullopt, 1, 0); }, "rope");
  expect_invalid(
      [&] {
        fast::rope(x, 8, false, std::nullopt, 1, 0, array({1.f, 2.f}));
      },
      "rope");
  expect_invalid([&] { fast::rope(x, 8, false, 1e4f, 1, array(1.0f)); },
                 "rope");
  expect_invalid(
      [&] {
        fast::rope(x, 8, false, 1e4f, 1, array({1, 2}));
      },
      "rope");
}

// ---- scaled_dot_product_attention
// ---------------------------------------------

struct Attn {
  int B, Nq, Nkv, Lq, Lk, D, Dv;
};

// mask: empty, or values broadcast to (B, Nq, Lq, Lk), boolean if is_bool.
std::vector<double> sdpa_ref(const Attn& a, const std::vector<double>& q,
                             const std::vector<double>& k,
                             const std::vector<double>& v, double scale,
                             bool causal, const std::vector<double>& mask,
                             bool is_bool, const std::vector<double>& sinks) {
  std::vector<double> out;
  const double hidden = -1e300; // a hidden key still counts when all are
  for (int b = 0; b < a.B; ++b) {
    for (int h = 0; h < a.Nq; ++h) {
      int kh = h / (a.Nq / a.Nkv);
      for (int i = 0; i < a.Lq; ++i) {
        std::vector<double> s(a.Lk);
        double m = sinks.empty() ? -INFINITY : sinks[h];
        for (int j = 0; j < a.Lk; ++j) {
          double dot = 0;
          for (int d = 0; d < a.D; ++d) {
            dot += q[((b * a.Nq + h) * a.Lq + i) * a.D + d] *
                   k[((b * a.Nkv + kh) * a.Lk + j) * a.D + d];
          }
          s[j] = dot * scale;
          size_t mi =
              ((static_cast<size_t>(b) * a.Nq + h) * a.Lq + i) * a.Lk + j;
          if (causal && j > i + a.Lk - a.Lq) s[j] = hidden;
          if (!mask.empty()) {
            if (is_bool && mask[mi] == 0) s[j] = hidden;
            if (!is_bool) s[j] += mask[mi];
          }
          m = std::max(m, s[j]);
        }
        double den = sinks.empty() ? 0 : std::exp(sinks[h] - m);
        for (int j = 0; j < a.Lk; ++j) den += std::exp(s[j] - m);
        for (int d = 0; d < a.Dv; ++d) {
          double acc = 0;
          for (int j = 0; j < a.Lk; ++j) {
            acc += std::exp(s[j] - m) / den *
                   v[((b * a.Nkv + kh) * a.Lk + j) * a.Dv + d];
          }
          out.push_back(acc);
        }
      }
    }
  }
  return out;
}

TEST(Attention, MatchesFloat64WithMasksAndGroupedHeads) {
  std::vector<Attn> shapes = {
      {2, 3, 3, 5, 7, 8, 6}, {1, 4, 2, 6, 6, 4, 4}, {2, 4, 1, 7, 5, 8, 3}};
  for (Dtype dt : float_dtypes()) {
    double tol = dt == float64 ? 1e-10 : tolerance(dt) * 8;
    for (auto& a : shapes) {
      auto q = random_array({a.B, a.Nq, a.Lq, a.D}, dt);
      auto k = random_array({a.B, a.Nkv, a.Lk, a.D}, dt);
      auto v = random_array({a.B, a.Nkv, a.Lk, a.Dv}, dt);
      auto qs = to_doubles(q), ks = to_doubles(k), vs = to_doubles(v);
      float scale = 1.0f / std::sqrt(static_cast<float>(a.D));
      Shape full = {a.B, a.Nq, a.Lq, a.Lk};
      auto name = dtype_name(dt) + " Nq " + std::to_string(a.Nq) + " Nkv " +
                  std::to_string(a.Nkv);
      check(fast::scaled_dot_product_attention(q, k, v, scale),
            sdpa_ref(a, qs, ks, vs, scale, false, {}, false, {}), tol,
            "plain " + name);
      check(fast::scaled_dot_product_attention(q, k, v, scale, "causal"),
            sdpa_ref(a, qs, ks, vs, scale, true, {}, false, {}), tol,
            "causal " + name);
      // A boolean mask over (B, 1, Lq, Lk) with one query seeing no key.
      auto bm = random_array({a.B, 1, a.Lq, a.Lk}, bool_);
      auto bms = to_doubles(bm);
      for (int j = 0; j < a.Lk; ++j) bms[j] = 0;
      bm = array(bms.begin(), {a.B, 1, a.Lq, a.Lk}, bool_);
      check(fast::scaled_dot_product_attention(q, k, v, scale, "", bm),
            sdpa_ref(a, qs, ks, vs, scale, false,
                     to_doubles(broadcast_to(bm, full)), true, {}),
            tol, "bool mask " + name);
      // An additive (Lq, Lk) mask, and sinks.
      auto am = random_array({a.Lq, a.Lk}, dt, -3, 1);
      auto sinks = random_array({a.Nq}, dt, -1, 2);
      check(fast::scaled_dot_product_attention(q, k, v, scale, "array", am,
                                               sinks),
            sdpa_ref(a, qs, ks, vs, scale, false,
                     to_doubles(broadcast_to(am, full)), false,
                     to_doubles(sinks)),
            tol, "additive mask and sinks " + name);
    }
  }
}

TEST(Attention, NonContiguousInputsAndPromotion) {
  Attn a{2, 4, 2, 5, 6, 8, 8};
  // q laid out (B, L, N, D) and viewed as (B, N, L, D); k transposed; v
  // broadcast over the batch.
  auto q =
      transpose(random_array({a.B, a.Lq, a.Nq, a.D}, float32), {0, 2, 1, 3});
  auto k = as_transposed(random_array({a.B, a.Nkv, a.Lk, a.D}, float32));
  auto v = broadcast_to(random_array({1, a.Nkv, a.Lk, a.Dv}, float32),
                        {a.B, a.Nkv, a.Lk, a.Dv});
  auto want = sdpa_ref(a, to_doubles(q), to_doubles(k), to_doubles(v), 0.3,
                       true, {}, false, {});
  check(fast::scaled_dot_product_attention(q, k, v, 0.3f, "causal"),
        std::vector<double>(want), 1e-5, "strided");
  // float16 q with float32 k and v computes in float32.
  auto qh = astype(random_array({1, 2, 3, 4}, float32), float16);
  auto kf = random_array({1, 2, 3, 4}, float32);
  auto y = fast::scaled_dot_product_attention(qh, kf, kf, 0.5f);
  EXPECT_EQ(y.dtype(), float32);
  Attn b{1, 2, 2, 3, 3, 4, 4};
  check(y,
        sdpa_ref(b, to_doubles(qh), to_doubles(kf), to_doubles(kf), 0.5, false,
                 {}, false, {}),
        1e-5, "promoted");
  auto empty = fast::scaled_dot_product_attention(
      zeros({1, 2, 0, 4}), zeros({1, 2, 3, 4}), zeros({1, 2, 3, 4}), 1.0f);
  EXPECT_EQ(empty.shape(), (Shape{1, 2, 0, 4}));
  EXPECT_TRUE(to_doubles(empty).empty());
}

TEST(Attention, BadArguments) {
  const std::string op = "scaled_dot_product_attention";
  auto q = zeros({1, 4, 3, 8}), k = zeros({1, 2, 5, 8}),
       v = zeros({1, 2, 5, 6});
  auto sdpa = [](auto&&... args) {
    return fast::scaled_dot_product_attention(args...);
  };
  expect_invalid([&] { sdpa(zeros({4, 3, 8}), k, v, 1.0f); }, op);
  expect_invalid([&] { sdpa(q, zeros({2, 2, 5, 8}), v, 1.0f); }, op);
  expect_invalid([&] { sdpa(q, zeros({1, 2, 5, 4}), v, 1.0f); }, op);
  expect_invalid([&] { sdpa(q, k, zeros({1, 2, 4, 6}), 1.0f); }, op);
  expect_invalid([&] { sdpa(zeros({1, 3, 3, 8}), k, v, 1.0f); }, op);
  expect_invalid(
      [&] {
        sdpa(zeros({1, 4, 3, 8}, int32), zeros({1, 2, 5, 8}, int32),
             zeros({1, 2, 5, 6}, int32), 1.0f);
      },
      op);
  expect_invalid([&] { sdpa(q, k, v, 1.0f, "window"); }, op);
  expect_invalid(
      [&] {
        sdpa(q, k, v, 1.0f, "causal", std::optional<array>(zeros({3, 5})));
      },
      op);
  expect_invalid(
      [&] {
        sdpa(q, k, v, 1.0f, "array", std::optional<array>(zeros({3, 4})));
      },
      op);
  auto qh = zeros({1, 4, 3, 8}, float16), kh = zeros({1, 2, 5, 8}, float16),
       vh = zeros({1, 2, 5, 6}, float16);
  expect_invalid(
      [&] {
        sdpa(qh, kh, vh, 1.0f, "", std::optional<array>(zeros({3, 5})));
      },
      op);
  expect_invalid(
      [&] {
        sdpa(q, k, v, 1.0f, "", std::optional<array>(),
             std::optional<array>(zeros({2})));
      },
      op);
}

} // namespace
} // namespace kiln::test
