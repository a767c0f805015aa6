// The AVX-512 sort of uint32 keys (backend/cpu/vector_sort.h) against
// std::sort: lengths around the register (16) and network (256) sizes and
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

void expect_sorted_like_std(std::vector<uint32_t> keys, const std::string& what) {
  std::vector<uint32_t> want = keys, tmp(keys.size());
  std::sort(want.begin(), want.end());
  detail::vector_sort_keys(keys.data(), tmp.data(), keys.size());
  ASSERT_EQ(keys, want) << what << ", n " << keys.size();
}

TEST(CpuVectorSort, MatchesStdSort) {
  if (!detail::vector_sort_available()) GTEST_SKIP() << "no AVX-512";
  std::mt19937 gen(7);
  for (size_t n : {0, 1, 2, 15, 16, 17, 31, 33, 64, 100, 128, 129, 255, 256,
                   257, 300, 511, 600, 2048, 4097, 100000}) {
    std::vector<uint32_t> v(n);
    for (auto& x : v) x = gen();
    expect_sorted_like_std(v, "random");
    for (auto& x : v) x = gen() % 3;
    expect_sorted_like_std(v, "three values");
    std::fill(v.begin(), v.end(), 7u);
    expect_sorted_like_std(v, "all equal");
    for (auto& x : v) x = gen() % 2 ? 0xFFFFFFFFu : gen();
    expect_sorted_like_std(v, "half the largest key");
    std::sort(v.begin(), v.end());
    expect_sorted_like_std(v, "sorted");
    std::reverse(v.begin(), v.end());
    expect_sorted_like_std(v, "reversed");
    for (size_t i = 0; i < n; ++i) v[i] = uint32_t(i % 2 ? i : n - i);
    expect_sorted_like_std(v, "organ pipe");
  }
}

} // namespace
} // namespace kiln::test
