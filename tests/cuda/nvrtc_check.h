// Compiling kernels through NVRTC for sm_90 with no GPU: the tests that
// check every device header and kernel family build without a device.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/backend/cuda/jit_module.h"

namespace kiln::test {

inline void expect_compiles(const cuda::JitKernel& k) {
  try {
    std::string cubin = cuda::jit_compile(k, "sm_90");
    ASSERT_GT(cubin.size(), 4u) << k.name;
    EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF") << k.name;
  } catch (const std::exception& e) {
    ADD_FAILURE() << k.name << ": " << e.what();
  }
}

/** One NVRTC program holding every kernel of ks (and their siblings), which
 *  share one source: the headers are parsed once for many instantiations. */
inline void expect_all_compile(const std::vector<cuda::JitKernel>& ks) {
  cuda::JitKernel all = ks.at(0);
  for (size_t i = 1; i < ks.size(); ++i) {
    ASSERT_EQ(ks[i].source, all.source) << ks[i].name;
    all.siblings.emplace_back(ks[i].name, ks[i].expression);
    all.siblings.insert(all.siblings.end(), ks[i].siblings.begin(),
                        ks[i].siblings.end());
  }
  expect_compiles(all);
}

} // namespace kiln::test
