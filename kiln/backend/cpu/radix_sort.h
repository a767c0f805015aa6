// LSD radix sort for long lines: every dtype maps to unsigned keys whose
// order is the sort order, sorted one byte per pass (passes where all keys
// share the byte are skipped). Several times faster than comparison sorts
// on 1e3..1e5 elements, and stable, which argsort needs.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dispatch.h"

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
  std::vector<U> keys, keys_tmp;
  std::vector<uint32_t> idx_tmp;
};

/** Stable sort of keys[0, n) (carrying idx along when not null); the result
 *  ends in keys/idx (the scratch buffers are swapped in as needed). */
template <typename U>
void radix_sort_keys(std::vector<U>& keys, std::vector<U>& tmp,
                     std::vector<uint32_t>* idx, std::vector<uint32_t>* itmp,
                     size_t n) {
  constexpr int passes = sizeof(U);
  std::array<std::array<uint32_t, 256>, passes> hist{};
  for (size_t i = 0; i < n; ++i) {
    for (int p = 0; p < passes; ++p) ++hist[p][(keys[i] >> (8 * p)) & 255];
  }
  tmp.resize(n);
  if (idx) itmp->resize(n);
  for (int p = 0; p < passes; ++p) {
    auto& h = hist[p];
    if (h[(keys[0] >> (8 * p)) & 255] == n) continue; // one digit: no-op
    uint32_t sum = 0;
    for (auto& c : h) sum += std::exchange(c, sum);
    for (size_t i = 0; i < n; ++i) {
      uint32_t pos = h[(keys[i] >> (8 * p)) & 255]++;
      tmp[pos] = keys[i];
      if (idx) (*itmp)[pos] = (*idx)[i];
    }
    keys.swap(tmp);
    if (idx) idx->swap(*itmp);
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
void radix_argsort(const S* v, std::vector<uint32_t>& idx, size_t n,
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
