// The AVX-512 sort of uint32 and uint64 keys (backend/cpu/vector_sort.h)
// against std::sort: lengths around the register (16 or 8 keys) and
// network (256 or 128) sizes and
// far past them, random keys, few distinct keys, all equal, the largest key
// (the network's padding), sorted, reversed and organ-pipe orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln/backend/cpu/vector_sort.h"

namespace kiln::test {
namespace {

template <typename K>
void expect_sorted_like_std(std::vector<K> keys, const std::string& what) {
  std::vector<K> want = keys, tmp(keys.size());
  std::sort(want.begin(), want.end());
  detail::vector_sort_keys(keys.data(), tmp.data(), keys.size());
  ASSERT_EQ(keys, want) << what << ", n " << keys.size();
}

template <typename K>
void sorts_like_std() {
  std::mt19937_64 gen(7);
  constexpr K largest = ~K(0);
  for (size_t n : {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 127, 128,
                   129, 255, 256, 257, 300, 511, 600, 2048, 4097, 100000}) {
    std::string what = std::to_string(8 * sizeof(K)) + "-bit keys, ";
    std::vector<K> v(n);
    for (auto& x : v) x = K(gen());
    expect_sorted_like_std(v, what + "random");
    for (auto& x : v) x = K(gen() % 3);
    expect_sorted_like_std(v, what + "three values");
    std::fill(v.begin(), v.end(), K(7));
    expect_sorted_like_std(v, what + "all equal");
    for (auto& x : v) x = gen() % 2 ? largest : K(gen());
    expect_sorted_like_std(v, what + "half the largest key");
    std::sort(v.begin(), v.end());
    expect_sorted_like_std(v, what + "sorted");
    std::reverse(v.begin(), v.end());
    expect_sorted_like_std(v, what + "reversed");
    for (size_t i = 0; i < n; ++i) v[i] = K(i % 2 ? i : n - i);
    expect_sorted_like_std(v, what + "organ pipe");
  }
}

TEST(CpuVectorSort, MatchesStdSort) {
  if (!detail::vector_sort_available()) GTEST_SKIP() << "no AVX-512";
  sorts_like_std<uint32_t>();
  sorts_like_std<uint64_t>();
}

} // namespace
} // namespace kiln::test
