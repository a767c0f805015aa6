// AVX-512 quicksort of uint32 keys (vector_sort.h).
//
// Each function that uses AVX-512 carries the target attribute itself and
// has internal linkage, so nothing compiled for AVX-512 can be picked by
// the linker for code that runs on other CPUs; callers check
// vector_sort_available() first.
#include "kiln/backend/cpu/vector_sort.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KILN_VECTOR_SORT 1
// GCC 12 warns inside its own AVX-512 min, max and permute intrinsics,
// whose unused pass-through operand is deliberately left undefined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::detail {

#ifdef KILN_VECTOR_SORT

namespace {

#define KILN_AVX512 __attribute__((target("avx512f,popcnt"), always_inline)) inline

constexpr int lanes = 16;
/** Pieces this short are sorted by the network (16 registers). */
constexpr size_t network_max = 256;

/** One compare-exchange step inside a register: each lane meets the lane
 *  whose index differs in bit `j`, and the lanes of `max_lanes` keep the
 *  larger key. */
struct LaneStep {
  alignas(64) uint32_t partner[lanes];
  uint16_t max_lanes;
};

/** The step of bitonic stage k (sorted runs of k/2 become runs of k) at
 *  distance j: runs whose index has bit k set sort descending, so that
 *  two neighbouring runs form a bitonic sequence for the next stage. With
 *  k = 32 every lane ascends (the merge of a bitonic register). */
constexpr LaneStep lane_step(int k, int j) {
  LaneStep s{};
  for (int i = 0; i < lanes; ++i) {
    s.partner[i] = static_cast<uint32_t>(i ^ j);
    bool ascending = (i & k) == 0;
    bool upper = (i & j) != 0;
    if (upper == ascending) s.max_lanes |= uint16_t(1u << i);
  }
  return s;
}

/** Sorting a register: stages k = 2, 4, 8, 16, each at distances k/2..1. */
constexpr LaneStep sort_steps[] = {
    lane_step(2, 1),  lane_step(4, 2),  lane_step(4, 1),  lane_step(8, 4),
    lane_step(8, 2),  lane_step(8, 1),  lane_step(16, 8), lane_step(16, 4),
    lane_step(16, 2), lane_step(16, 1)};
/** Merging a bitonic register into ascending order: distances 8..1. */
constexpr LaneStep merge_steps[] = {lane_step(32, 8), lane_step(32, 4),
                                    lane_step(32, 2), lane_step(32, 1)};

struct Reverse {
  alignas(64) uint32_t index[lanes];
};
constexpr Reverse reverse_lanes_index = {
    {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}};

KILN_AVX512 __m512i apply(__m512i v, const LaneStep& s) {
  __m512i p = _mm512_permutexvar_epi32(
      _mm512_load_si512(reinterpret_cast<const void*>(s.partner)), v);
  return _mm512_mask_blend_epi32(s.max_lanes, _mm512_min_epu32(v, p),
                                 _mm512_max_epu32(v, p));
}

KILN_AVX512 __m512i sort_register(__m512i v) {
  for (const LaneStep& s : sort_steps) v = apply(v, s);
  return v;
}

KILN_AVX512 __m512i merge_register(__m512i v) {
  for (const LaneStep& s : merge_steps) v = apply(v, s);
  return v;
}

KILN_AVX512 __m512i reverse_register(__m512i v) {
  return _mm512_permutexvar_epi32(
      _mm512_load_si512(
          reinterpret_cast<const void*>(reverse_lanes_index.index)),
      v);
}

KILN_AVX512 void exchange(__m512i& a, __m512i& b) {
  __m512i lo = _mm512_min_epu32(a, b);
  b = _mm512_max_epu32(a, b);
  a = lo;
}

/** W registers holding a bitonic sequence of 16W keys, into ascending
 *  order: half-cleaners at register distances W/2..1, then each register. */
template <int W>
KILN_AVX512 void merge_bitonic(__m512i* r) {
  for (int d = W / 2; d >= 1; d /= 2) {
    for (int i = 0; i < W; ++i) {
      if ((i & d) == 0) exchange(r[i], r[i + d]);
    }
  }
  for (int i = 0; i < W; ++i) r[i] = merge_register(r[i]);
}

/** Two ascending runs of W registers each (r[0, W) and r[W, 2W)) into one
 *  ascending run: the second run reversed makes the whole bitonic; one
 *  half-cleaner at distance 16W splits it into two bitonic halves, each
 *  below the next. */
template <int W>
KILN_AVX512 void merge_runs(__m512i* r) {
  __m512i* b = r + W;
  for (int i = 0; i < W / 2; ++i) {
    __m512i t = b[i];
    b[i] = b[W - 1 - i];
    b[W - 1 - i] = t;
  }
  for (int i = 0; i < W; ++i) b[i] = reverse_register(b[i]);
  for (int i = 0; i < W; ++i) exchange(r[i], b[i]);
  merge_bitonic<W>(r);
  merge_bitonic<W>(b);
}

/** Sorts the 16R keys of r[0, R), R a power of two up to 16. */
template <int R>
KILN_AVX512 void sort_registers(__m512i* r) {
  for (int i = 0; i < R; ++i) r[i] = sort_register(r[i]);
  if constexpr (R >= 2) {
    for (int i = 0; i < R; i += 2) merge_runs<1>(r + i);
  }
  if constexpr (R >= 4) {
    for (int i = 0; i < R; i += 4) merge_runs<2>(r + i);
  }
  if constexpr (R >= 8) {
    for (int i = 0; i < R; i += 8) merge_runs<4>(r + i);
  }
  if constexpr (R >= 16) merge_runs<8>(r);
}

KILN_AVX512 __mmask16 first_lanes(size_t count) {
  return count >= lanes ? __mmask16(0xFFFF)
                        : __mmask16((1u << count) - 1);
}

/** Sorts src[0, n) (n <= 256) into dst (which may be src): the keys go
 *  into R registers, padded with the largest key, which sorts last. */
template <int R>
KILN_AVX512 void network_sort(const uint32_t* src, uint32_t* dst, size_t n) {
  __m512i r[R];
  const __m512i pad = _mm512_set1_epi32(-1);
  for (int i = 0; i < R; ++i) {
    size_t at = size_t(i) * lanes;
    r[i] = _mm512_mask_loadu_epi32(pad, first_lanes(n > at ? n - at : 0),
                                   src + at);
  }
  sort_registers<R>(r);
  for (int i = 0; i < R; ++i) {
    size_t at = size_t(i) * lanes;
    _mm512_mask_storeu_epi32(dst + at, first_lanes(n > at ? n - at : 0),
                             r[i]);
  }
}

KILN_AVX512 void small_sort(const uint32_t* src, uint32_t* dst, size_t n) {
  if (n <= 16) {
    network_sort<1>(src, dst, n);
  } else if (n <= 32) {
    network_sort<2>(src, dst, n);
  } else if (n <= 64) {
    network_sort<4>(src, dst, n);
  } else if (n <= 128) {
    network_sort<8>(src, dst, n);
  } else {
    network_sort<16>(src, dst, n);
  }
}

/** The median of sixteen keys spread over a[0, n) (n > 256). */
KILN_AVX512 uint32_t choose_pivot(const uint32_t* a, size_t n) {
  alignas(64) uint32_t sample[lanes];
  size_t step = n / lanes;
  for (int i = 0; i < lanes; ++i) sample[i] = a[step / 2 + i * step];
  __m512i v = sort_register(_mm512_load_si512(sample));
  _mm512_store_si512(sample, v);
  return sample[lanes / 2];
}

/** Writes the keys of src[0, n) that are below the pivot (or not above
 *  it, with OrEqual) to the front of dst, the others to its back; returns
 *  how many went to the front. */
template <bool OrEqual>
KILN_AVX512 size_t partition(const uint32_t* src, uint32_t* dst, size_t n,
                             uint32_t pivot) {
  constexpr int predicate = OrEqual ? _MM_CMPINT_LE : _MM_CMPINT_LT;
  const __m512i p = _mm512_set1_epi32(static_cast<int>(pivot));
  size_t front = 0, back = n;
  for (size_t i = 0; i < n; i += lanes) {
    __mmask16 valid = first_lanes(n - i);
    __m512i v = _mm512_maskz_loadu_epi32(valid, src + i);
    __mmask16 low = _mm512_mask_cmp_epu32_mask(valid, v, p, predicate);
    __mmask16 high = __mmask16(valid & ~low);
    // Compressed in a register, then a masked store: compress-store to
    // memory is microcoded on Intel's cores, several times slower.
    int below = _mm_popcnt_u32(low), above = _mm_popcnt_u32(high);
    _mm512_mask_storeu_epi32(dst + front, first_lanes(below),
                             _mm512_maskz_compress_epi32(low, v));
    front += below;
    back -= above;
    _mm512_mask_storeu_epi32(dst + back, first_lanes(above),
                             _mm512_maskz_compress_epi32(high, v));
  }
  return front;
}

void fallback_sort(uint32_t* keys, size_t n) { std::sort(keys, keys + n); }

/** Sorts src[0, n) with the result in dst when `to_dst`, else in src; the
 *  other buffer is scratch. Each level partitions from one buffer into the
 *  other, so the parts alternate between them as they shrink. Past the
 *  depth limit (an adversarial order) the rest is std::sort's. */
__attribute__((target("avx512f,popcnt"))) void quicksort(
    uint32_t* src, uint32_t* dst, size_t n, bool to_dst, int depth) {
  uint32_t* out = to_dst ? dst : src;
  if (n <= network_max) {
    small_sort(src, out, n);
    return;
  }
  if (depth == 0) {
    if (to_dst) std::memcpy(dst, src, n * sizeof(uint32_t));
    fallback_sort(out, n);
    return;
  }
  uint32_t pivot = choose_pivot(src, n);
  size_t front = partition<false>(src, dst, n, pivot);
  size_t equal_end = front;
  if (front == 0) {
    // Nothing below the pivot, which is the least key: take the keys
    // equal to it as a finished part (all of them when all are equal).
    equal_end = partition<true>(src, dst, n, pivot);
    if (!to_dst) std::memcpy(src, dst, equal_end * sizeof(uint32_t));
  } else {
    // The front part now lives in dst: sort it so that it ends in `out`.
    quicksort(dst, src, front, !to_dst, depth - 1);
  }
  quicksort(dst + equal_end, src + equal_end, n - equal_end, !to_dst,
            depth - 1);
}

int depth_limit(size_t n) {
  int levels = 0;
  while (n > 1) n >>= 1, ++levels;
  return 2 * levels + 8;
}

} // namespace

bool vector_sort_available() {
  static const bool available = __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("popcnt");
  return available;
}

void vector_sort_keys(uint32_t* keys, uint32_t* tmp, size_t n) {
  quicksort(keys, tmp, n, false, depth_limit(n));
}

#else // not x86-64 with GCC or Clang

bool vector_sort_available() { return false; }
void vector_sort_keys(uint32_t* keys, uint32_t*, size_t n) {
  std::sort(keys, keys + n);
}

#endif

} // namespace kiln::detail
