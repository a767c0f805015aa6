// The NVRTC JIT's caches: a kernel compiled by one process is read from the
// disk cache by the next, a corrupt cache file is ignored and rebuilt, and
// concurrent first use compiles once. Kernels used here are ones no build
// compiles ahead of time (float64 arctanh and friends).
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include <fcntl.h>
#include <unistd.h>

#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cuda/gpu_fixture.h"
#include "kiln/backend/cuda/elementwise_kernels.h"
#include "kiln/backend/cuda/jit_module.h"
#include "kiln/backend/cuda/kernels.h"
#include "run_self.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using GpuJitCache = GpuTest;

// The child: runs a JIT-only kernel and checks the cache statistics the
// parent asked for (KILN_TEST_EXPECT = cold | warm | corrupt).
TEST_F(GpuJitCache, Child) {
  const char* expect = std::getenv("KILN_TEST_EXPECT");
  if (expect == nullptr) GTEST_SKIP() << "run by DiskHitFromNewProcess";
  array x = random_array({257}, float64, -0.9, 0.9);
  EXPECT_TRUE(same_on_devices(
      [](const std::vector<array>& v, Device d) { return arctanh(v[0], d); },
      {x}, 1e-12));
  auto st = cuda::jit_stats();
  std::string e = expect;
  if (e == "cold") {
    EXPECT_GE(st.compiles, 1);
    EXPECT_EQ(st.disk_hits, 0);
  } else if (e == "warm") {
    EXPECT_EQ(st.compiles, 0);
    EXPECT_GE(st.disk_hits, 1);
  } else {
    EXPECT_GE(st.disk_rejected, 1);
    EXPECT_GE(st.compiles, 1);
  }
}

TEST_F(GpuJitCache, DiskHitFromNewProcessAndCorruptFileIgnored) {
  std::string dir = fs::temp_directory_path() /
                    ("kiln-cuda-jit-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<std::string> env = {"KILN_CACHE_DIR=" + dir};
  auto with = [&](const char* mode) {
    auto e = env;
    e.push_back(std::string("KILN_TEST_EXPECT=") + mode);
    return run_self("GpuJitCache.Child", e);
  };
  ASSERT_EQ(with("cold"), 0);
  // The directory is private and holds sealed cubins.
  auto perms = fs::status(dir + "/cuda").permissions();
  EXPECT_EQ(perms & (fs::perms::group_all | fs::perms::others_all),
            fs::perms::none);
  int cubins = 0;
  for (auto& f : fs::directory_iterator(dir + "/cuda")) {
    cubins += f.path().extension() == ".cubin";
  }
  EXPECT_GE(cubins, 1);
  ASSERT_EQ(with("warm"), 0);
  // Corrupt every cubin: flip bytes in the middle and truncate another.
  int n = 0;
  for (auto& f : fs::directory_iterator(dir + "/cuda")) {
    if (f.path().extension() != ".cubin") continue;
    auto size = fs::file_size(f.path());
    if (n++ % 2) {
      fs::resize_file(f.path(), size / 2);
    } else {
      std::fstream s(f.path(), std::ios::in | std::ios::out | std::ios::binary);
      s.seekp(static_cast<std::streamoff>(size / 2));
      s.write("garbage!", 8);
    }
  }
  ASSERT_EQ(with("corrupt"), 0);
  fs::remove_all(dir);
}

TEST_F(GpuJitCache, ConcurrentFirstUseCompilesOnce) {
  // A kernel name unique to this process run, so neither cache has it.
  cuda::JitKernel k = cuda::unary_kernel("ArcSinh", float64, float64, "v");
  k.name += "_concurrency_" + std::to_string(::getpid());
  k.source += "// " + k.name + "\n"; // a distinct disk key too
  auto before = cuda::jit_stats();
  constexpr int threads = 8;
  std::barrier sync(threads);
  std::vector<CUfunction> got(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      sync.arrive_and_wait();
      got[i] = cuda::jit_function(k);
    });
  }
  for (auto& t : pool) t.join();
  auto after = cuda::jit_stats();
  EXPECT_EQ(after.compiles + after.disk_hits,
            before.compiles + before.disk_hits + 1);
  for (auto f : got) EXPECT_EQ(f, got[0]);
  EXPECT_NE(got[0], nullptr);
}

TEST_F(GpuJitCache, CompileErrorIsAClearException) {
  cuda::JitKernel k{"vBroken", "#include \"kiln/backend/cuda/device/elementwise.cuh\"\n",
                    "kiln::cuda::unary_v<kiln::cuda::NoSuchOp, float, float, 4>"};
  try {
    cuda::jit_function(k);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("vBroken"), std::string::npos);
  }
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
