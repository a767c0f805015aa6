// eval_cpu of the random primitives: Threefry-2x32 bits and MLX's float32
// erf/erfinv approximations.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/backend/cpu/copy.h"
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/primitives/random.h"

namespace kiln {

namespace {

using Pair = std::pair<uint32_t, uint32_t>;

// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3"), the counter-based hash JAX and MLX use.
Pair threefry2x32(Pair key, Pair count) {
  static constexpr int rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {key.first, key.second,
                          key.first ^ key.second ^ 0x1BD11BDAu};
  uint32_t x0 = count.first + ks[0];
  uint32_t x1 = count.second + ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r : rotations[i % 2]) {
      x0 += x1;
      x1 = (x1 << r) | (x1 >> (32 - r));
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + static_cast<uint32_t>(i + 1);
  }
  return {x0, x1};
}

// Fast exp, erf and erfinv in float32 with the approximations MLX's CPU
// backend uses (Cephes exp, Abramowitz-Stegun 7.1.26 erf, a minimax
// erfinv in log(1 - x^2)), so samplers built on them reproduce MLX's draws.
float mlx_exp(float x) {
  float y = x * 1.442695f;
  // MLX rounds in double here (its 0.5 is a double literal).
  float ipart = static_cast<float>(std::floor(static_cast<double>(y) + 0.5));
  float f = y - ipart;
  float p = 1.535336188319500e-4f;
  p = std::fma(p, f, 1.339887440266574e-3f);
  p = std::fma(p, f, 9.618437357674640e-3f);
  p = std::fma(p, f, 5.550332471162809e-2f);
  p = std::fma(p, f, 2.402264791363012e-1f);
  p = std::fma(p, f, 6.931472028550421e-1f);
  p = std::fma(p, f, 1.0f);
  if (std::isnan(x)) return x;
  if (x > 88.0f) return INFINITY;
  if (x < -88.0f) return 0.0f;
  uint32_t bits = static_cast<uint32_t>(static_cast<int>(ipart) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return scale * p;
}

float mlx_erf(float x) {
  float t = 1.0f / std::fma(0.3275911f, std::fabs(x), 1.0f);
  float r = std::fma(1.061405429f, t, -1.453152027f);
  r = std::fma(r, t, 1.421413741f);
  r = std::fma(r, t, -0.284496736f);
  r = std::fma(r, t, 0.254829592f);
  float e = -mlx_exp(-x * x);
  float y = std::fma(e * t, r, 1.0f);
  return x > 0 ? y : -y;
}

float mlx_erfinv(float a) {
  float t = std::log(std::fma(a, 0.0f - a, 1.0f));
  float p;
  if (std::fabs(t) > 6.125f) {
    p = 3.03697567e-10f;
    p = std::fma(p, t, 2.93243101e-8f);
    p = std::fma(p, t, 1.22150334e-6f);
    p = std::fma(p, t, 2.84108955e-5f);
    p = std::fma(p, t, 3.93552968e-4f);
    p = std::fma(p, t, 3.02698812e-3f);
    p = std::fma(p, t, 4.83185798e-3f);
    p = std::fma(p, t, -2.64646143e-1f);
    p = std::fma(p, t, 8.40016484e-1f);
  } else {
    p = 5.43877832e-9f;
    p = std::fma(p, t, 1.43285448e-7f);
    p = std::fma(p, t, 1.22774793e-6f);
    p = std::fma(p, t, 1.12963626e-7f);
    p = std::fma(p, t, -5.61530760e-5f);
    p = std::fma(p, t, -1.47697632e-4f);
    p = std::fma(p, t, 2.31468678e-3f);
    p = std::fma(p, t, 1.15392581e-2f);
    p = std::fma(p, t, -2.32015476e-1f);
    p = std::fma(p, t, 8.86226892e-1f);
  }
  return a * p;
}

// Gather along `axis` in the order that sorts the keys; T only carries the
// element's bytes.
// Word j < half comes from the first output of counter (j, j + half + odd),
// word j + half + odd from its second; an odd middle word from (half, 0).
// A trailing partial word keeps its low-order bytes. Words [lo, hi) of the
// first half are written to the nbytes at dst.
void fill_bits(Pair key, char* dst, size_t nbytes, size_t lo, size_t hi) {
  size_t words = (nbytes + 3) / 4;
  size_t half = words / 2;
  size_t odd = words % 2;
  auto put = [&](size_t word, uint32_t v) {
    size_t n = std::min<size_t>(4, nbytes - 4 * word);
    std::memcpy(dst + 4 * word, &v, n); // little-endian: low bytes first
  };
  for (size_t j = lo; j < std::min(hi, half); ++j) {
    auto r = threefry2x32(
        key, {static_cast<uint32_t>(j), static_cast<uint32_t>(j + half + odd)});
    put(j, r.first);
    put(j + half + odd, r.second);
  }
  if (odd && hi > half) {
    put(half, threefry2x32(key, {static_cast<uint32_t>(half), 0u}).first);
  }
}

} // namespace

// Several keys (shape (..., 2), from vmap over keys) each fill an equal,
// consecutive share of the output as if drawn alone.
void RandomBits::eval_cpu(const std::vector<array>& inputs, array& out) {
  array keys = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  size_t nbytes = out.nbytes();
  size_t num_keys = keys.size() / 2;
  if (nbytes == 0 || num_keys == 0) return;
  keys = detail::row_major(keys);
  const uint32_t* kp = keys.data<uint32_t>();
  char* dst = out.data<char>();
  size_t per_key = nbytes / num_keys;
  if (num_keys == 1) {
    size_t half = (per_key + 3) / 4 / 2;
    detail::parallel_for(half + 1, 1 << 14, [&](size_t b, size_t e) {
      fill_bits({kp[0], kp[1]}, dst, per_key, b, e);
    });
    return;
  }
  size_t grain = std::max<size_t>(1, (1 << 16) / std::max<size_t>(per_key, 1));
  detail::parallel_for(num_keys, grain, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      fill_bits({kp[2 * k], kp[2 * k + 1]}, dst + k * per_key, per_key, 0,
                SIZE_MAX);
    }
  });
}

void Float32Erf::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  dispatch_type(in.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      auto op = [inv = inverse_](compute_t<T> x) {
        float v = static_cast<float>(x);
        return static_cast<compute_t<T>>(inv ? mlx_erfinv(v) : mlx_erf(v));
      };
      detail::unary_loop<T, T>(in, out, op);
    } else {
      detail::unsupported_dtype(name(), in.dtype());
    }
  });
}

} // namespace kiln
