// Lane loops over GCC's vector types: each of the 16 lanes keeps its own
// extreme (and its first position, by strict comparison), and the lanes
// meet at the end. target_clones builds the same source for AVX-512, AVX2
// and the baseline (where a 16-lane vector is four SSE registers); scalar
// code of the same shape stayed scalar, branches and all. Not built with
// -ffast-math: NaN must be seen.
#include "kiln/backend/cpu/extremes.h"
#include "kiln/backend/cpu/simd_clones.h"

#include <cstring>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
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
  KILN_SIMD_CLONES float name( \
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
KILN_SIMD_CLONES size_t
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
  KILN_SIMD_CLONES uint32_t   \
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

#if defined(__x86_64__) && defined(__GNUC__)
// The same search with AVX-512 intrinsics and four accumulators taking
// vectors in turn, so four compare-and-select chains run at once: one
// chain is bound by its latency (argmax along 2048x2048 float32 rows 0.97
// ms, against 0.45-0.5 ms for max). GCC's vector extensions turned the
// four-chain form into scalar compares, so it is written out here. For
// runs of at least 64 elements; ties go to the smaller index, a NaN to
// first_nan.
template <bool is_max>
__attribute__((target("avx512f"))) uint32_t arg_extreme_avx512(const float* p,
                                                               size_t n) {
  constexpr int better_than = is_max ? _CMP_GT_OQ : _CMP_LT_OQ;
  const __m512i step = _mm512_set1_epi32(16);
  __m512 b[4];
  __m512i a[4];
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                  13, 14, 15);
  __mmask16 nan = 0;
  for (int k = 0; k < 4; ++k) {
    b[k] = _mm512_loadu_ps(p + 16 * k);
    a[k] = idx;
    idx = _mm512_add_epi32(idx, step);
    nan |= _mm512_cmp_ps_mask(b[k], b[k], _CMP_UNORD_Q);
  }
  size_t i = 64;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      __m512 v = _mm512_loadu_ps(p + i + 16 * k);
      __mmask16 take = _mm512_cmp_ps_mask(v, b[k], better_than);
      b[k] = _mm512_mask_mov_ps(b[k], take, v);
      a[k] = _mm512_mask_mov_epi32(a[k], take, idx);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      idx = _mm512_add_epi32(idx, step);
    }
  }
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(p + i);
    __mmask16 take = _mm512_cmp_ps_mask(v, b[0], better_than);
    b[0] = _mm512_mask_mov_ps(b[0], take, v);
    a[0] = _mm512_mask_mov_epi32(a[0], take, idx);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    idx = _mm512_add_epi32(idx, step);
  }
  for (int k = 1; k < 4; ++k) {
    __mmask16 take =
        _mm512_cmp_ps_mask(b[k], b[0], better_than) |
        (_mm512_cmp_ps_mask(b[k], b[0], _CMP_EQ_OQ) &
         _mm512_cmplt_epi32_mask(a[k], a[0]));
    b[0] = _mm512_mask_mov_ps(b[0], take, b[k]);
    a[0] = _mm512_mask_mov_epi32(a[0], take, a[k]);
  }
  bool any_nan = nan != 0;
  for (size_t j = i; j < n; ++j) any_nan |= p[j] != p[j];
  if (any_nan) return static_cast<uint32_t>(first_nan(p, n));
  alignas(64) float best[16];
  alignas(64) int32_t at[16];
  _mm512_store_ps(best, b[0]);
  _mm512_store_si512(at, a[0]);
  float top = best[0];
  uint32_t top_at = static_cast<uint32_t>(at[0]);
  for (int l = 1; l < 16; ++l) {
    uint32_t x = static_cast<uint32_t>(at[l]);
    bool better = is_max ? best[l] > top : best[l] < top;
    if (better || (best[l] == top && x < top_at)) top = best[l], top_at = x;
  }
  for (; i < n; ++i) {
    if (is_max ? p[i] > top : p[i] < top) top = p[i], top_at = uint32_t(i);
  }
  return top_at;
}

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#else
template <bool is_max>
uint32_t arg_extreme_avx512(const float*, size_t) { return 0; }
bool has_avx512() { return false; }
#endif

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
  if (n >= 4 * lanes && has_avx512()) return arg_extreme_avx512<true>(p, n);
  return n < 2 * lanes ? arg_extreme_short<true>(p, n) : argmax_lanes(p, n);
}

uint32_t argmin_run_f32(const float* p, size_t n) {
  if (n >= 4 * lanes && has_avx512()) return arg_extreme_avx512<false>(p, n);
  return n < 2 * lanes ? arg_extreme_short<false>(p, n) : argmin_lanes(p, n);
}

} // namespace kiln::detail
