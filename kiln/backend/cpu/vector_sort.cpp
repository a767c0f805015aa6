// AVX-512 quicksort of uint32 and uint64 keys (vector_sort.h).
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

#define KILN_AVX512 \
  __attribute__((target("avx512f,popcnt"), always_inline)) inline

/** The AVX-512 operations on a register of K keys (16 of 32 bits or 8 of
 *  64 bits), unsigned. */
template <typename K>
struct Keys;

template <>
struct Keys<uint32_t> {
  static constexpr int lanes = 16;
  KILN_AVX512 static __m512i min(__m512i a, __m512i b) {
    return _mm512_min_epu32(a, b);
  }
  KILN_AVX512 static __m512i max(__m512i a, __m512i b) {
    return _mm512_max_epu32(a, b);
  }
  KILN_AVX512 static __m512i permute(__m512i index, __m512i v) {
    return _mm512_permutexvar_epi32(index, v);
  }
  KILN_AVX512 static __m512i blend(uint32_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi32(__mmask16(m), a, b);
  }
  KILN_AVX512 static __m512i broadcast(uint32_t k) {
    return _mm512_set1_epi32(static_cast<int>(k));
  }
  KILN_AVX512 static __m512i load(__m512i pad, uint32_t m, const uint32_t* p) {
    return _mm512_mask_loadu_epi32(pad, __mmask16(m), p);
  }
  KILN_AVX512 static void store(uint32_t* p, uint32_t m, __m512i v) {
    _mm512_mask_storeu_epi32(p, __mmask16(m), v);
  }
  template <int Predicate>
  KILN_AVX512 static uint32_t compare(uint32_t m, __m512i a, __m512i b) {
    return _mm512_mask_cmp_epu32_mask(__mmask16(m), a, b, Predicate);
  }
  KILN_AVX512 static __m512i compress(uint32_t m, __m512i v) {
    return _mm512_maskz_compress_epi32(__mmask16(m), v);
  }
};

template <>
struct Keys<uint64_t> {
  static constexpr int lanes = 8;
  KILN_AVX512 static __m512i min(__m512i a, __m512i b) {
    return _mm512_min_epu64(a, b);
  }
  KILN_AVX512 static __m512i max(__m512i a, __m512i b) {
    return _mm512_max_epu64(a, b);
  }
  KILN_AVX512 static __m512i permute(__m512i index, __m512i v) {
    return _mm512_permutexvar_epi64(index, v);
  }
  KILN_AVX512 static __m512i blend(uint32_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi64(__mmask8(m), a, b);
  }
  KILN_AVX512 static __m512i broadcast(uint64_t k) {
    return _mm512_set1_epi64(static_cast<long long>(k));
  }
  KILN_AVX512 static __m512i load(__m512i pad, uint32_t m, const uint64_t* p) {
    return _mm512_mask_loadu_epi64(pad, __mmask8(m), p);
  }
  KILN_AVX512 static void store(uint64_t* p, uint32_t m, __m512i v) {
    _mm512_mask_storeu_epi64(p, __mmask8(m), v);
  }
  template <int Predicate>
  KILN_AVX512 static uint32_t compare(uint32_t m, __m512i a, __m512i b) {
    return _mm512_mask_cmp_epu64_mask(__mmask8(m), a, b, Predicate);
  }
  KILN_AVX512 static __m512i compress(uint32_t m, __m512i v) {
    return _mm512_maskz_compress_epi64(__mmask8(m), v);
  }
};

/** One compare-exchange step inside a register: each lane meets the lane
 *  whose index differs in bit `j`, and the lanes of `max_lanes` keep the
 *  larger key. */
template <typename K>
struct LaneStep {
  alignas(64) K partner[Keys<K>::lanes];
  uint32_t max_lanes;
};

/** The step of bitonic stage k (sorted runs of k/2 become runs of k) at
 *  distance j: runs whose index has bit k set sort descending, so that
 *  two neighbouring runs form a bitonic sequence for the next stage. With
 *  k = 2 * lanes every lane ascends (the merge of a bitonic register). */
template <typename K>
constexpr LaneStep<K> lane_step(int k, int j) {
  LaneStep<K> s{};
  for (int i = 0; i < Keys<K>::lanes; ++i) {
    s.partner[i] = static_cast<K>(i ^ j);
    bool ascending = (i & k) == 0;
    bool upper = (i & j) != 0;
    if (upper == ascending) s.max_lanes |= 1u << i;
  }
  return s;
}

constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }

/** Sorting a register: stages k = 2 .. lanes, each at distances k/2 .. 1. */
template <typename K>
struct SortSteps {
  static constexpr int levels = log2_of(Keys<K>::lanes);
  LaneStep<K> step[levels * (levels + 1) / 2];
  constexpr SortSteps() : step() {
    int at = 0;
    for (int k = 2; k <= Keys<K>::lanes; k *= 2) {
      for (int j = k / 2; j >= 1; j /= 2) step[at++] = lane_step<K>(k, j);
    }
  }
};

/** Merging a bitonic register into ascending order: distances lanes/2..1. */
template <typename K>
struct MergeSteps {
  static constexpr int levels = log2_of(Keys<K>::lanes);
  LaneStep<K> step[levels];
  constexpr MergeSteps() : step() {
    int at = 0;
    for (int j = Keys<K>::lanes / 2; j >= 1; j /= 2) {
      step[at++] = lane_step<K>(2 * Keys<K>::lanes, j);
    }
  }
};

template <typename K>
struct Reverse {
  alignas(64) K index[Keys<K>::lanes];
  constexpr Reverse() : index() {
    for (int i = 0; i < Keys<K>::lanes; ++i) {
      index[i] = static_cast<K>(Keys<K>::lanes - 1 - i);
    }
  }
};

template <typename K>
constexpr SortSteps<K> sort_steps{};
template <typename K>
constexpr MergeSteps<K> merge_steps{};
template <typename K>
constexpr Reverse<K> reverse_lanes{};

template <typename K>
KILN_AVX512 __m512i apply(__m512i v, const LaneStep<K>& s) {
  using X = Keys<K>;
  __m512i p = X::permute(
      _mm512_load_si512(reinterpret_cast<const void*>(s.partner)), v);
  return X::blend(s.max_lanes, X::min(v, p), X::max(v, p));
}

template <typename K>
KILN_AVX512 __m512i sort_register(__m512i v) {
  for (const auto& s : sort_steps<K>.step) v = apply<K>(v, s);
  return v;
}

template <typename K>
KILN_AVX512 __m512i merge_register(__m512i v) {
  for (const auto& s : merge_steps<K>.step) v = apply<K>(v, s);
  return v;
}

template <typename K>
KILN_AVX512 __m512i reverse_register(__m512i v) {
  return Keys<K>::permute(
      _mm512_load_si512(reinterpret_cast<const void*>(reverse_lanes<K>.index)),
      v);
}

template <typename K>
KILN_AVX512 void exchange(__m512i& a, __m512i& b) {
  __m512i lo = Keys<K>::min(a, b);
  b = Keys<K>::max(a, b);
  a = lo;
}

/** W registers holding a bitonic sequence, into ascending order:
 *  half-cleaners at register distances W/2..1, then each register. */
template <typename K, int W>
KILN_AVX512 void merge_bitonic(__m512i* r) {
  for (int d = W / 2; d >= 1; d /= 2) {
    for (int i = 0; i < W; ++i) {
      if ((i & d) == 0) exchange<K>(r[i], r[i + d]);
    }
  }
  for (int i = 0; i < W; ++i) r[i] = merge_register<K>(r[i]);
}

/** Two ascending runs of W registers each (r[0, W) and r[W, 2W)) into one
 *  ascending run: the second run reversed makes the whole bitonic; one
 *  half-cleaner at the distance of W registers splits it into two bitonic
 *  halves, each below the next. */
template <typename K, int W>
KILN_AVX512 void merge_runs(__m512i* r) {
  __m512i* b = r + W;
  for (int i = 0; i < W / 2; ++i) {
    __m512i t = b[i];
    b[i] = b[W - 1 - i];
    b[W - 1 - i] = t;
  }
  for (int i = 0; i < W; ++i) b[i] = reverse_register<K>(b[i]);
  for (int i = 0; i < W; ++i) exchange<K>(r[i], b[i]);
  merge_bitonic<K, W>(r);
  merge_bitonic<K, W>(b);
}

/** Sorts the keys of r[0, R), R a power of two up to 16. */
template <typename K, int R>
KILN_AVX512 void sort_registers(__m512i* r) {
  for (int i = 0; i < R; ++i) r[i] = sort_register<K>(r[i]);
  if constexpr (R >= 2) {
    for (int i = 0; i < R; i += 2) merge_runs<K, 1>(r + i);
  }
  if constexpr (R >= 4) {
    for (int i = 0; i < R; i += 4) merge_runs<K, 2>(r + i);
  }
  if constexpr (R >= 8) {
    for (int i = 0; i < R; i += 8) merge_runs<K, 4>(r + i);
  }
  if constexpr (R >= 16) merge_runs<K, 8>(r);
}

template <typename K>
KILN_AVX512 uint32_t first_lanes(size_t count) {
  constexpr int lanes = Keys<K>::lanes;
  return count >= size_t(lanes) ? (1u << lanes) - 1 : (1u << count) - 1;
}

/** Pieces this short are sorted by the network (16 registers: 256 32-bit
 *  keys, 128 64-bit ones). */
template <typename K>
constexpr size_t network_max = 16 * Keys<K>::lanes;

/** Sorts src[0, n) (n <= network_max) into dst (which may be src): the
 *  keys go into R registers, padded with the largest key, which sorts
 *  last. */
template <typename K, int R>
KILN_AVX512 void network_sort(const K* src, K* dst, size_t n) {
  constexpr int lanes = Keys<K>::lanes;
  __m512i r[R];
  const __m512i pad = _mm512_set1_epi32(-1);
  for (int i = 0; i < R; ++i) {
    size_t at = size_t(i) * lanes;
    r[i] = Keys<K>::load(pad, first_lanes<K>(n > at ? n - at : 0), src + at);
  }
  sort_registers<K, R>(r);
  for (int i = 0; i < R; ++i) {
    size_t at = size_t(i) * lanes;
    Keys<K>::store(dst + at, first_lanes<K>(n > at ? n - at : 0), r[i]);
  }
}

template <typename K>
KILN_AVX512 void small_sort(const K* src, K* dst, size_t n) {
  constexpr size_t lanes = Keys<K>::lanes;
  if (n <= lanes) {
    network_sort<K, 1>(src, dst, n);
  } else if (n <= 2 * lanes) {
    network_sort<K, 2>(src, dst, n);
  } else if (n <= 4 * lanes) {
    network_sort<K, 4>(src, dst, n);
  } else if (n <= 8 * lanes) {
    network_sort<K, 8>(src, dst, n);
  } else {
    network_sort<K, 16>(src, dst, n);
  }
}

/** The median of one register of keys spread over a[0, n) (n >
 *  network_max). */
template <typename K>
KILN_AVX512 K choose_pivot(const K* a, size_t n) {
  constexpr int lanes = Keys<K>::lanes;
  alignas(64) K sample[lanes];
  size_t step = n / lanes;
  for (int i = 0; i < lanes; ++i) sample[i] = a[step / 2 + i * step];
  __m512i v = sort_register<K>(_mm512_load_si512(sample));
  _mm512_store_si512(sample, v);
  return sample[lanes / 2];
}

/** Writes the keys of src[0, n) that are below the pivot (or not above
 *  it, with OrEqual) to the front of dst, the others to its back; returns
 *  how many went to the front. */
template <typename K, bool OrEqual>
KILN_AVX512 size_t partition(const K* src, K* dst, size_t n, K pivot) {
  using X = Keys<K>;
  constexpr int predicate = OrEqual ? _MM_CMPINT_LE : _MM_CMPINT_LT;
  const __m512i p = X::broadcast(pivot);
  const __m512i zero = _mm512_setzero_si512();
  size_t front = 0, back = n;
  for (size_t i = 0; i < n; i += X::lanes) {
    uint32_t valid = first_lanes<K>(n - i);
    __m512i v = X::load(zero, valid, src + i);
    uint32_t low = X::template compare<predicate>(valid, v, p);
    uint32_t high = valid & ~low;
    // Compressed in a register, then a masked store: compress-store to
    // memory is microcoded on Intel's cores, several times slower.
    int below = _mm_popcnt_u32(low), above = _mm_popcnt_u32(high);
    X::store(dst + front, first_lanes<K>(below), X::compress(low, v));
    front += below;
    back -= above;
    X::store(dst + back, first_lanes<K>(above), X::compress(high, v));
  }
  return front;
}

/** Sorts src[0, n) with the result in dst when `to_dst`, else in src; the
 *  other buffer is scratch. Each level partitions from one buffer into the
 *  other, so the parts alternate between them as they shrink. Past the
 *  depth limit (an adversarial order) the rest is std::sort's. */
template <typename K>
__attribute__((target("avx512f,popcnt"))) void quicksort(K* src, K* dst,
                                                        size_t n, bool to_dst,
                                                        int depth) {
  K* out = to_dst ? dst : src;
  if (n <= network_max<K>) {
    small_sort<K>(src, out, n);
    return;
  }
  if (depth == 0) {
    if (to_dst) std::memcpy(dst, src, n * sizeof(K));
    std::sort(out, out + n);
    return;
  }
  K pivot = choose_pivot<K>(src, n);
  size_t front = partition<K, false>(src, dst, n, pivot);
  size_t equal_end = front;
  if (front == 0) {
    // Nothing below the pivot, which is the least key: take the keys
    // equal to it as a finished part (all of them when all are equal).
    equal_end = partition<K, true>(src, dst, n, pivot);
    if (!to_dst) std::memcpy(src, dst, equal_end * sizeof(K));
  } else {
    // The front part now lives in dst: sort it so that it ends in `out`.
    quicksort<K>(dst, src, front, !to_dst, depth - 1);
  }
  quicksort<K>(dst + equal_end, src + equal_end, n - equal_end, !to_dst,
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
  quicksort<uint32_t>(keys, tmp, n, false, depth_limit(n));
}

void vector_sort_keys(uint64_t* keys, uint64_t* tmp, size_t n) {
  quicksort<uint64_t>(keys, tmp, n, false, depth_limit(n));
}

#else // not x86-64 with GCC or Clang

bool vector_sort_available() { return false; }
void vector_sort_keys(uint32_t* keys, uint32_t*, size_t n) {
  std::sort(keys, keys + n);
}
void vector_sort_keys(uint64_t* keys, uint64_t*, size_t n) {
  std::sort(keys, keys + n);
}

#endif

} // namespace kiln::detail
