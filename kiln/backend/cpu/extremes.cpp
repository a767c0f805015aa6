// Lane loops over GCC's vector types: each of the 16 lanes keeps its own
// extreme (and its first position, by strict comparison), and the lanes
// meet at the end. target_clones builds the same source for AVX-512, AVX2
// and the baseline (where a 16-lane vector is four SSE registers); scalar
// code of the same shape stayed scalar, branches and all. Not built with
// -ffast-math: NaN must be seen.
#include "kiln/backend/cpu/extremes.h"

#include <cstring>
#include <limits>

namespace kiln::detail {

namespace {

constexpr size_t lanes = 16;
typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));

// The lanes' extremes ignore NaN (a plain compare and select, which the
// clones turn into vmaxps/vminps-like blends); a second lane mask collects
// NaNs, and any NaN makes the result NaN.
#define KILN_EXTREME_RUN(name, cmp, init)                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) float name( \
      const float* p, size_t n) {                                          \
    f32x16 m = f32x16{} + (init);                                          \
    i32x16 nan{};                                                          \
    size_t i = 0;                                                          \
    for (; i + lanes <= n; i += lanes) {                                   \
      f32x16 v;                                                            \
      std::memcpy(&v, p + i, sizeof(v));                                   \
      m = v cmp m ? v : m;                                                 \
      nan |= v != v;                                                       \
    }                                                                      \
    float r = init;                                                        \
    bool any_nan = false;                                                  \
    for (size_t l = 0; l < lanes; ++l) {                                   \
      any_nan |= nan[l] != 0;                                              \
      if (m[l] cmp r) r = m[l];                                            \
    }                                                                      \
    for (; i < n; ++i) {                                                   \
      any_nan |= p[i] != p[i];                                             \
      if (p[i] cmp r) r = p[i];                                            \
    }                                                                      \
    return any_nan ? std::numeric_limits<float>::quiet_NaN() : r;          \
  }

// The first NaN's index, or n: blocks of 256 tested lane-wise, the block
// holding one scanned.
__attribute__((target_clones("avx512f", "avx2", "default"))) size_t
first_nan(const float* p, size_t n) {
  for (size_t b = 0; b < n; b += 256) {
    size_t e = b + 256 < n ? b + 256 : n, i = b;
    i32x16 acc{};
    for (; i + lanes <= e; i += lanes) {
      f32x16 v;
      std::memcpy(&v, p + i, sizeof(v));
      acc |= v != v;
    }
    bool any = false;
    for (size_t l = 0; l < lanes; ++l) any |= acc[l] != 0;
    for (; i < e; ++i) any |= p[i] != p[i];
    if (any) {
      for (i = b; i < e; ++i) {
        if (p[i] != p[i]) return i;
      }
    }
  }
  return n;
}

// One pass, n >= lanes: ties between lanes go to the smaller index, which
// makes the result the first extreme overall. A NaN anywhere (a lane mask
// collects them) hands the answer to first_nan.
#define KILN_ARG_EXTREME_LANES(name, cmp)                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) uint32_t   \
  name(const float* p, size_t n) {                                         \
    f32x16 best;                                                           \
    std::memcpy(&best, p, sizeof(best));                                   \
    i32x16 at = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};    \
    i32x16 idx = at;                                                       \
    i32x16 nan = best != best;                                             \
    size_t i = lanes;                                                      \
    for (; i + lanes <= n; i += lanes) {                                   \
      idx += static_cast<int32_t>(lanes);                                  \
      f32x16 v;                                                            \
      std::memcpy(&v, p + i, sizeof(v));                                   \
      i32x16 take = v cmp best;                                            \
      best = take ? v : best;                                              \
      at = take ? idx : at;                                                \
      nan |= v != v;                                                       \
    }                                                                      \
    bool any_nan = false;                                                  \
    for (size_t l = 0; l < lanes; ++l) any_nan |= nan[l] != 0;             \
    for (size_t j = i; j < n; ++j) any_nan |= p[j] != p[j];                \
    if (any_nan) return static_cast<uint32_t>(first_nan(p, n));            \
    float top = best[0];                                                   \
    uint32_t top_at = static_cast<uint32_t>(at[0]);                        \
    for (size_t l = 1; l < lanes; ++l) {                                   \
      uint32_t a = static_cast<uint32_t>(at[l]);                           \
      if (best[l] cmp top || (best[l] == top && a < top_at)) {             \
        top = best[l];                                                     \
        top_at = a;                                                        \
      }                                                                    \
    }                                                                      \
    for (; i < n; ++i) {                                                   \
      if (p[i] cmp top) {                                                  \
        top = p[i];                                                        \
        top_at = static_cast<uint32_t>(i);                                 \
      }                                                                    \
    }                                                                      \
    return top_at;                                                         \
  }

KILN_ARG_EXTREME_LANES(argmax_lanes, >)
KILN_ARG_EXTREME_LANES(argmin_lanes, <)

// A run too short for the lanes: the plain scan (the first NaN wins).
template <bool is_max>
uint32_t arg_extreme_short(const float* p, size_t n) {
  size_t nan = first_nan(p, n);
  if (nan < n) return static_cast<uint32_t>(nan);
  uint32_t best = 0;
  for (size_t i = 1; i < n; ++i) {
    if (is_max ? p[i] > p[best] : p[i] < p[best]) {
      best = static_cast<uint32_t>(i);
    }
  }
  return best;
}

} // namespace

KILN_EXTREME_RUN(max_run_f32, >, -std::numeric_limits<float>::infinity())
KILN_EXTREME_RUN(min_run_f32, <, std::numeric_limits<float>::infinity())

uint32_t argmax_run_f32(const float* p, size_t n) {
  return n < 2 * lanes ? arg_extreme_short<true>(p, n) : argmax_lanes(p, n);
}

uint32_t argmin_run_f32(const float* p, size_t n) {
  return n < 2 * lanes ? arg_extreme_short<false>(p, n) : argmin_lanes(p, n);
}

} // namespace kiln::detail
