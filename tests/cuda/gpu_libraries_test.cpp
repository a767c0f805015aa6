// A build with the GPU backend whose CUDA libraries are missing (a wheel
// installed without its cuda13 extra) loads, says what is missing, and runs
// what asks for the GPU on the CPU, warning once. The child process is
// given a library path that does not exist: a named library is the only
// one tried, so NVRTC is missing there whatever the machine has.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kiln/core/device.h"
#include "kiln/core/gpu_libraries.h"
#include "kiln/core/primitive.h"
#include "kiln/ops/elementwise.h"
#include "run_self.h"

namespace kiln::test {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos;
       p = text.find(what, p + 1)) {
    ++n;
  }
  return n;
}

TEST(GpuLibraries, ChildWithoutNvrtc) {
  if (std::getenv("KILN_TEST_NO_NVRTC") == nullptr) {
    GTEST_SKIP() << "run by MissingLibrariesRunOnTheCpu";
  }
  const std::string& missing = gpu::missing_libraries();
  EXPECT_NE(missing.find("libnvrtc.so."), std::string::npos) << missing;
  EXPECT_NE(missing.find("nvidia-cuda-nvrtc"), std::string::npos) << missing;
  EXPECT_EQ(missing.find("libcudart"), std::string::npos) << missing;
  EXPECT_FALSE(gpu::is_available());
  EXPECT_FALSE(is_available(Device::gpu));

  testing::internal::CaptureStderr();
  set_default_device(Device::gpu); // runs on the CPU, no exception
  array y = exp(array({0.0f, 1.0f}), Device::gpu);
  Stream s = new_stream(Device::gpu);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(default_device(), Device(Device::cpu));
  EXPECT_EQ(y.primitive().stream().device, Device(Device::cpu));
  EXPECT_EQ(s.device, Device(Device::cpu));
  y.eval();
  EXPECT_FLOAT_EQ(y.data<float>()[1], 2.7182817f);
  EXPECT_EQ(count(said, "runs on the CPU"), 1u) << said;
  EXPECT_NE(said.find("kiln[cuda13]"), std::string::npos) << said;
}

TEST(GpuLibraries, MissingLibrariesRunOnTheCpu) {
  EXPECT_EQ(run_self("GpuLibraries.ChildWithoutNvrtc",
                     {"KILN_TEST_NO_NVRTC=1",
                      "KILN_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13"}),
            0);
  // This process found them: the toolkit it was built with is here.
  EXPECT_EQ(gpu::missing_libraries(), "");
}

} // namespace
} // namespace kiln::test

#endif
