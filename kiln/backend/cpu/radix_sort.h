// LSD radix sort for long lines: every dtype maps to unsigned keys whose
// order is the sort order, sorted one byte per pass (passes where all keys
// share the byte are skipped); the longest lines are split by their top
// bits first. Several times faster than comparison sorts on 1e3..1e5
// elements, and stable, which argsort needs.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/backend/cpu/scratch.h"
#include "kiln/backend/cpu/vector_sort.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"

namespace kiln::detail {

/** Lines at least this long are radix sorted. */
inline constexpr int64_t radix_min_length = 256;

template <size_t N>
using uint_of_size = std::conditional_t<
    N == 1, uint8_t,
    std::conditional_t<N == 2, uint16_t,
                       std::conditional_t<N == 4, uint32_t, uint64_t>>>;

template <typename T>
using radix_key_t = uint_of_size<sizeof(T)>;

template <typename T>
constexpr bool radix_is_float =
    std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
    std::is_same_v<T, bfloat16_t>;

/** Order-preserving key of a non-NaN value (floats: -0 sorts before +0). */
template <typename T>
radix_key_t<T> radix_key(T v) {
  using U = radix_key_t<T>;
  constexpr U sign = U(U(1) << (8 * sizeof(T) - 1));
  U b;
  std::memcpy(&b, &v, sizeof(T));
  if constexpr (radix_is_float<T>) {
    return (b & sign) ? U(~b) : U(b | sign);
  } else if constexpr (std::is_signed_v<T>) {
    return U(b ^ sign);
  } else {
    return b;
  }
}

template <typename T>
T radix_value(radix_key_t<T> k) {
  using U = radix_key_t<T>;
  constexpr U sign = U(U(1) << (8 * sizeof(T) - 1));
  U b = k;
  if constexpr (radix_is_float<T>) {
    b = (k & sign) ? U(k & ~sign) : U(~k);
  } else if constexpr (std::is_signed_v<T>) {
    b = U(k ^ sign);
  }
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

template <typename T>
bool radix_isnan(T v) {
  if constexpr (radix_is_float<T>) {
    return std::isnan(static_cast<compute_t<T>>(v));
  } else {
    return false;
  }
}

/** Reusable buffers, one set per thread. */
template <typename U>
struct RadixScratch {
  scratch_vector<U> keys, keys_tmp;
  scratch_vector<uint32_t> idx_tmp;
};

/** Stable sort of keys[0, n) by their low `bits` bits, carrying idx along
 *  when not null, one byte per pass between keys and tmp (passes where
 *  all keys share the byte are skipped). True when the result ended in
 *  tmp (and itmp). */
template <typename U>
bool radix_lsd(U* keys, U* tmp, uint32_t* idx, uint32_t* itmp, size_t n,
               int bits) {
  const int passes = (bits + 7) / 8;
  std::array<std::array<uint32_t, 256>, sizeof(U)> hist{};
  for (size_t i = 0; i < n; ++i) {
    for (int p = 0; p < passes; ++p) ++hist[p][(keys[i] >> (8 * p)) & 255];
  }
  bool in_tmp = false;
  for (int p = 0; p < passes; ++p) {
    auto& h = hist[p];
    U* from = in_tmp ? tmp : keys;
    U* to = in_tmp ? keys : tmp;
    uint32_t* ifrom = in_tmp ? itmp : idx;
    uint32_t* ito = in_tmp ? idx : itmp;
    if (h[(from[0] >> (8 * p)) & 255] == n) continue; // one digit: no-op
    uint32_t sum = 0;
    for (auto& c : h) sum += std::exchange(c, sum);
    for (size_t i = 0; i < n; ++i) {
      uint32_t pos = h[(from[i] >> (8 * p)) & 255]++;
      to[pos] = from[i];
      if (idx) ito[pos] = ifrom[i];
    }
    in_tmp = !in_tmp;
  }
  return in_tmp;
}

/** Lines at least this long are first split by their keys' top 11 bits
 *  (one pass over memory), then each part is sorted by the remaining bits
 *  where it fits in cache, the parts spread over the cores. Sorting every
 *  byte of a long line in place scatters over the whole line at each pass:
 *  28 against 10 ns per float32 at 4M elements. */
inline constexpr size_t radix_split_min_length = size_t(1) << 16;
inline constexpr int radix_split_bits = 11;

/** radix_sort_keys for long lines of 32- and 64-bit keys (tmp and itmp
 *  already sized): split by the top bits, then each part by the rest
 *  (without indices: by the AVX-512 sort where there is one). */
template <typename U>
void radix_split_sort(scratch_vector<U>& keys, scratch_vector<U>& tmp,
                      scratch_vector<uint32_t>* idx,
                      scratch_vector<uint32_t>* itmp, size_t n,
                      const std::pair<U, U>* span = nullptr) {
  uint32_t* ip = idx ? idx->data() : nullptr;
  uint32_t* itp = idx ? itmp->data() : nullptr;
  // Split by the top bits into tmp (stably), then sort each part. The
  // split runs on every core: each counts its share of the line, then
  // scatters it from where the shares before it end in each part.
  //
  // Parts are (key >> shift) - base: the top radix_split_bits bits of the
  // key, unless the keys span fewer than a 32nd of those parts (small
  // integers in 64-bit keys, a few distinct values, all of them in one or
  // two parts otherwise); then the top bits of the keys' span, from a pass
  // that finds it, counted again. A caller that knows the span (least and
  // most key) passes it, and the parts come from it at once. The keys of a
  // part share key >> shift, so sorting a part by its low `shift` bits
  // sorts it.
  constexpr size_t parts = size_t(1) << radix_split_bits;
  const size_t shares = std::max<size_t>(
      1, std::min<size_t>(num_threads(), n / radix_split_min_length));
  auto share = [&](size_t t) {
    return std::pair{t * n / shares, (t + 1) * n / shares};
  };
  std::vector<std::vector<uint32_t>> next(shares, std::vector<uint32_t>(parts));
  int shift = 8 * sizeof(U) - radix_split_bits;
  U base = 0;
  auto count = [&] {
    parallel_for(shares, 1, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        auto [lo, hi] = share(t);
        std::fill(next[t].begin(), next[t].end(), 0u);
        uint32_t* c = next[t].data();
        for (size_t i = lo; i < hi; ++i) ++c[(keys[i] >> shift) - base];
      }
    });
  };
  // At most half the parts: scattering to 2^11 places measured slower
  // than to 2^10 on the build machine (4M float32, 30 against 21 ms).
  auto fit_to = [&](U least, U most) {
    while (shift > 0 &&
           size_t((most >> (shift - 1)) - (least >> (shift - 1))) < parts / 2) {
      --shift;
    }
    base = least >> shift;
  };
  if (span) {
    fit_to(span->first, span->second);
    count();
  } else {
    count();
    size_t first = parts, last = 0;
    for (size_t b = 0; b < parts; ++b) {
      for (size_t t = 0; t < shares; ++t) {
        if (next[t][b]) first = std::min(first, b), last = std::max(last, b);
      }
    }
    if (last - first < parts / 32 && shift > 0) {
      std::vector<std::pair<U, U>> spans(shares);
      parallel_for(shares, 1, [&](size_t b, size_t e) {
        for (size_t t = b; t < e; ++t) {
          auto [lo, hi] = share(t);
          U l = U(~U(0)), m = 0;
          for (size_t i = lo; i < hi; ++i) {
            l = std::min(l, keys[i]), m = std::max(m, keys[i]);
          }
          spans[t] = {l, m};
        }
      });
      U least = U(~U(0)), most = 0;
      for (auto [l, m] : spans) {
        least = std::min(least, l), most = std::max(most, m);
      }
      fit_to(least, most);
      count();
    }
  }
  std::vector<uint32_t> start(parts + 1, 0);
  for (size_t b = 0, at = 0; b < parts; ++b) {
    start[b] = static_cast<uint32_t>(at);
    for (size_t t = 0; t < shares; ++t) at += std::exchange(next[t][b], at);
    start[b + 1] = static_cast<uint32_t>(at);
  }
  parallel_for(shares, 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      auto [lo, hi] = share(t);
      uint32_t* to = next[t].data();
      for (size_t i = lo; i < hi; ++i) {
        uint32_t pos = to[(keys[i] >> shift) - base]++;
        tmp[pos] = keys[i];
        if (idx) itp[pos] = ip[i];
      }
    }
  });
  // Largest parts first, taken by whichever thread is free.
  std::vector<uint32_t> order;
  size_t largest = 0;
  for (size_t b = 0; b < parts; ++b) {
    size_t len = start[b + 1] - start[b];
    if (len > 1) order.push_back(static_cast<uint32_t>(b));
    largest = std::max(largest, len);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return start[a + 1] - start[a] > start[b + 1] - start[b];
  });
  std::atomic<size_t> taken{0};
  parallel_for(num_threads(), 1, [&](size_t, size_t) {
    scratch_vector<U> part_tmp(largest);
    scratch_vector<uint32_t> part_itmp(idx ? largest : 0);
    for (size_t j; (j = taken.fetch_add(1)) < order.size();) {
      uint32_t b = order[j], off = start[b], len = start[b + 1] - off;
      if constexpr (sizeof(U) >= 4) {
        if (!idx && vector_sort_available()) {
          vector_sort_keys(tmp.data() + off, part_tmp.data(), len);
          continue;
        }
      }
      uint32_t* pi = idx ? itp + off : nullptr;
      if (radix_lsd(tmp.data() + off, part_tmp.data(), pi,
                    part_itmp.data(), len, shift)) {
        std::memcpy(tmp.data() + off, part_tmp.data(), len * sizeof(U));
        if (idx) {
          std::memcpy(pi, part_itmp.data(), len * sizeof(uint32_t));
        }
      }
    }
  });
  keys.swap(tmp);
  if (idx) idx->swap(*itmp);
}

/** Stable sort of keys[0, n) (carrying idx along when not null); the result
 *  ends in keys/idx (the scratch buffers are swapped in as needed). */
template <typename U>
void radix_sort_keys(scratch_vector<U>& keys, scratch_vector<U>& tmp,
                     scratch_vector<uint32_t>* idx,
                     scratch_vector<uint32_t>* itmp, size_t n) {
  tmp.resize(n);
  if (idx) itmp->resize(n);
  uint32_t* ip = idx ? idx->data() : nullptr;
  uint32_t* itp = idx ? itmp->data() : nullptr;
  auto lsd_only = [&] {
    if (radix_lsd(keys.data(), tmp.data(), ip, itp, n, 8 * sizeof(U))) {
      keys.swap(tmp);
      if (idx) idx->swap(*itmp);
    }
  };
  if constexpr (sizeof(U) < 4) {
    lsd_only(); // two passes at most: nothing to split
  } else if (n < radix_split_min_length) {
    lsd_only();
  } else {
    radix_split_sort(keys, tmp, idx, itmp, n);
  }
}

/** Sorts v[0, n) in place, NaNs last (in their original order). */
template <typename T, typename S>
void radix_sort_values(S* v, size_t n, RadixScratch<radix_key_t<T>>& s) {
  s.keys.clear();
  size_t nans = 0;
  for (size_t i = 0; i < n; ++i) {
    T x = static_cast<T>(v[i]);
    if (radix_isnan(x)) {
      v[nans++] = v[i]; // NaNs compact to the front, then move last
    } else {
      s.keys.push_back(radix_key(x));
    }
  }
  size_t m = s.keys.size();
  if (m > 0) radix_sort_keys(s.keys, s.keys_tmp, nullptr, nullptr, m);
  std::memmove(v + m, v, nans * sizeof(S));
  for (size_t i = 0; i < m; ++i)
    v[i] = static_cast<S>(radix_value<T>(s.keys[i]));
}

/** Stable argsort of v[0, n) into idx (NaNs last; -0 and +0 tie). */
template <typename T, typename S>
void radix_argsort(const S* v, scratch_vector<uint32_t>& idx, size_t n,
                   RadixScratch<radix_key_t<T>>& s) {
  using U = radix_key_t<T>;
  s.keys.resize(n);
  for (size_t i = 0; i < n; ++i) {
    T x = static_cast<T>(v[i]);
    if (radix_isnan(x)) {
      s.keys[i] = U(~U(0));
    } else {
      U k = radix_key(x);
      if constexpr (radix_is_float<T>) {
        if (k == U(U(~U(0)) >> 1)) k = radix_key(T(0.0f)); // -0 ties +0
      }
      s.keys[i] = k;
    }
    idx[i] = static_cast<uint32_t>(i);
  }
  radix_sort_keys(s.keys, s.keys_tmp, &idx, &s.idx_tmp, n);
}

} // namespace kiln::detail
