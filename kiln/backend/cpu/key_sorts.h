// Sorting one line's values by their order-preserving keys (radix_key):
// by counting for 8-bit dtypes and long lines of 16-bit ones (a table of
// every key), else through the AVX-512 sort (vector_sort.h) for 16-, 32-
// and 64-bit dtypes on CPUs that have it. NaNs follow the numbers in their
// original order, as NanLast puts them. sort_line_by_keys returns false
// where neither applies, and the caller's radix and comparison sorts run.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/radix_sort.h"
#include "kiln/backend/cpu/scratch.h"
#include "kiln/backend/cpu/vector_sort.h"
#include "kiln/core/thread_pool.h"

namespace kiln::detail {

/** Lines at least this long are counted: 8-bit dtypes (256 counts), and
 *  16-bit ones (65536 counts, which shorter lines do not pay for). */
inline constexpr int64_t counting_min_length_8 = 64;
inline constexpr int64_t counting_min_length_16 = 16384;

template <typename T>
constexpr bool sorts_by_vector_keys =
    std::is_same_v<T, float> || std::is_same_v<T, int32_t> ||
    std::is_same_v<T, uint32_t> || std::is_same_v<T, float16_t> ||
    std::is_same_v<T, bfloat16_t> || std::is_same_v<T, int16_t> ||
    std::is_same_v<T, uint16_t> || std::is_same_v<T, double> ||
    std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>;

/** The vector sort's key of T: 64 bits for 8-byte dtypes, else 32. */
template <typename T>
using sort_key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

/** v's bits, zero-extended to its sort key's width. */
template <typename T>
sort_key_t<T> bits_of(T v) {
  radix_key_t<T> b;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

template <typename T>
T value_of_bits(sort_key_t<T> b) {
  T v;
  radix_key_t<T> narrow = static_cast<radix_key_t<T>>(b);
  std::memcpy(&v, &narrow, sizeof(T));
  return v;
}

/** Whether bits (from bits_of) are a NaN's; integer tests, so the loops
 *  that make keys vectorize. */
template <typename T>
bool nan_bits(sort_key_t<T> b) {
  if constexpr (std::is_same_v<T, double>) {
    return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
  } else if constexpr (std::is_same_v<T, float>) {
    return (b & 0x7fffffffu) > 0x7f800000u;
  } else if constexpr (std::is_same_v<T, float16_t>) {
    return (b & 0x7fffu) > 0x7c00u;
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return (b & 0x7fffu) > 0x7f80u;
  } else {
    return false;
  }
}

/** The sort key of a number (radix_key, widened to sort_key_t): a 16-bit
 *  key goes in the top half of its 32 bits, so that a split by the top
 *  bits sees it. */
template <typename T>
sort_key_t<T> sort_key(T v) {
  sort_key_t<T> k = radix_key(v);
  return sizeof(T) == 2 ? k << 16 : k;
}

template <typename T>
T from_sort_key(sort_key_t<T> k) {
  return radix_value<T>(
      static_cast<radix_key_t<T>>(sizeof(T) == 2 ? k >> 16 : k));
}

/** fn(begin, end) over [0, n): on every core for a line long enough to be
 *  split by its top bits (the passes over it are bound by one core's
 *  memory traffic: 4M float32, 6.4 ms of 27), else in one call. */
template <typename Fn>
void over_line(int64_t n, Fn&& fn) {
  if (n >= int64_t(radix_split_min_length)) {
    parallel_for(n, size_t(1) << 16, fn);
  } else {
    fn(size_t(0), size_t(n));
  }
}

/** Sorting by counting: element j of [0, n) falls in slot slot_of(j) of
 *  [0, slots], slot `slots` for one left out (a NaN); each core counts its
 *  share of a long line. Then value_of(slot) is written to y as often as
 *  it was counted, in slot order. Returns how many were written (all but
 *  those left out). */
template <typename T, typename SlotOf, typename ValueOf>
int64_t count_and_write(int64_t n, size_t slots, SlotOf slot_of,
                        ValueOf value_of, T* y, int64_t ys) {
  const size_t shares =
      n >= int64_t(radix_split_min_length)
          ? std::max<size_t>(1, std::min<size_t>(num_threads(), n >> 16))
          : 1;
  const size_t stride = slots + 1;
  scratch_vector<uint32_t> counts(shares * stride, 0);
  parallel_for(shares, 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      uint32_t* c = counts.data() + t * stride;
      for (int64_t j = int64_t(t) * n / int64_t(shares),
                   end = int64_t(t + 1) * n / int64_t(shares);
           j < end; ++j) {
        ++c[slot_of(j)];
      }
    }
  });
  int64_t j = 0;
  for (size_t slot = 0; slot < slots; ++slot) {
    uint32_t c = 0;
    for (size_t t = 0; t < shares; ++t) c += counts[t * stride + slot];
    if (c == 0) continue;
    T v = value_of(slot);
    if (ys == 1) {
      std::fill(y + j, y + j + c, v);
      j += c;
    } else {
      for (; c > 0; --c) y[j++ * ys] = v;
    }
  }
  return j;
}

/** Sorts a line of an 8- or 16-bit dtype by counting its keys; its NaNs
 *  follow in their original order. */
template <typename T>
void counting_sort_line(const T* x, T* y, int64_t n, int64_t xs,
                        int64_t ys) {
  constexpr size_t keys = size_t(1) << (8 * sizeof(T));
  int64_t m = count_and_write(
      n, keys,
      [&](int64_t j) {
        T v = x[j * xs];
        return nan_bits<T>(bits_of(v)) ? keys : size_t(radix_key(v));
      },
      [](size_t k) { return radix_value<T>(static_cast<radix_key_t<T>>(k)); },
      y, ys);
  for (int64_t j = 0; m < n; ++j) {
    T v = x[j * xs];
    if (nan_bits<T>(bits_of(v))) y[m++ * ys] = v;
  }
}

/** Sorts the keys k[0, n), all within [least, most] (a span under 2^16),
 *  by counting them, and writes their values to y in order. */
template <typename T, typename K>
void counting_sort_keys(const K* k, int64_t n, K least, K most, T* y,
                        int64_t ys) {
  count_and_write(
      n, size_t(most - least) + 1,
      [&](int64_t j) { return size_t(k[j] - least); },
      [&](size_t slot) { return from_sort_key<T>(K(least + slot)); }, y, ys);
}

/** Sorts a line of a 16-, 32- or 64-bit dtype through the AVX-512 sort. The
 *  keys are made in one branch-free pass; a line with NaNs is then
 *  compacted: its numbers' keys to the front, its NaNs' bits from the
 *  back (in reverse), read back in their original order at the end. */
template <typename T, typename K = sort_key_t<T>>
void vector_sort_line(const T* x, T* y, int64_t n, int64_t xs, int64_t ys,
                      scratch_vector<K>& keys, scratch_vector<K>& tmp) {
  keys.resize(n);
  tmp.resize(n);
  K* k = keys.data();
  std::atomic<bool> nans{false};
  // The keys' span, for long lines (the split and the counting below).
  std::mutex span_mutex;
  K least = K(~K(0)), most = 0;
  over_line(n, [&](size_t b, size_t e) {
    uint32_t seen = 0; // an integer, so that the loop vectorizes
    K lo = K(~K(0)), hi = 0;
    auto make_keys = [&](auto step) {
      for (size_t j = b; j < e; ++j) {
        T v = x[int64_t(j) * step];
        seen |= nan_bits<T>(bits_of(v));
        K key = sort_key(v);
        k[j] = key;
        lo = std::min(lo, key);
        hi = std::max(hi, key);
      }
    };
    if (xs == 1) {
      make_keys(std::integral_constant<int64_t, 1>{});
    } else {
      make_keys(xs);
    }
    if (seen) nans = true;
    std::lock_guard<std::mutex> lock(span_mutex);
    least = std::min(least, lo), most = std::max(most, hi);
  });
  if (!nans && n >= counting_min_length_16 && most - least < K(1) << 16) {
    // Few distinct keys (labels, token ids): counted, as 16-bit dtypes are.
    counting_sort_keys(k, n, least, most, y, ys);
    return;
  }
  int64_t m = n, back = n;
  if (nans) {
    m = 0;
    for (int64_t j = 0; j < n; ++j) {
      T v = x[j * xs];
      K b = bits_of(v);
      if (nan_bits<T>(b)) {
        k[--back] = b;
      } else {
        k[m++] = sort_key(v);
      }
    }
  }
  if (m >= int64_t(radix_split_min_length)) {
    // Split by the top bits first, the parts sorted in cache on every core
    // (radix_split_sort, which swaps the buffers: the NaNs move across).
    std::vector<K> nan_keys(keys.begin() + back, keys.end());
    std::pair<K, K> span{least, most};
    radix_split_sort(keys, tmp, nullptr, nullptr, m, nans ? nullptr : &span);
    std::copy(nan_keys.begin(), nan_keys.end(), keys.begin() + back);
    k = keys.data();
  } else {
    vector_sort_keys(k, tmp.data(), m);
  }
  over_line(n, [&](size_t b, size_t e) {
    e = std::min<size_t>(e, m);
    if (ys == 1) {
      for (size_t j = b; j < e; ++j) y[j] = from_sort_key<T>(k[j]);
    } else {
      for (size_t j = b; j < e; ++j) {
        y[int64_t(j) * ys] = from_sort_key<T>(k[j]);
      }
    }
  });
  for (int64_t j = m; j < n; ++j) {
    y[j * ys] = value_of_bits<T>(k[n - 1 - (j - m)]);
  }
}

/** Sorts one line by keys where a method here applies; false otherwise. */
template <typename T>
bool sort_line_by_keys(const T* x, T* y, int64_t n, int64_t xs, int64_t ys,
                       scratch_vector<sort_key_t<T>>& keys,
                       scratch_vector<sort_key_t<T>>& tmp) {
  if constexpr (sizeof(T) == 1) {
    if (n < counting_min_length_8) return false;
    counting_sort_line(x, y, n, xs, ys);
    return true;
  } else if constexpr (sorts_by_vector_keys<T>) {
    if constexpr (sizeof(T) == 2) {
      if (n >= counting_min_length_16) {
        counting_sort_line(x, y, n, xs, ys);
        return true;
      }
    }
    if (!vector_sort_available()) return false;
    vector_sort_line(x, y, n, xs, ys, keys, tmp);
    return true;
  } else {
    return false;
  }
}

} // namespace kiln::detail
