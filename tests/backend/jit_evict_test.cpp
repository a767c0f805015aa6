// The disk caches' size limit: whole entries go, least recently used first;
// files that are not cache entries, and files being written, stay.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "jit_fixture.h"
#include "kiln/backend/common/jit_disk.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

void write(const std::string& path, size_t bytes, int64_t age_s) {
  std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
  struct timespec t[2];
  t[0].tv_sec = t[1].tv_sec = time(nullptr) - age_s;
  t[0].tv_nsec = t[1].tv_nsec = 0;
  ::utimensat(AT_FDCWD, path.c_str(), t, 0);
}

TEST(JitEvict, OldestWholeEntriesGoFirst) {
  TempDir dir;
  const std::string d = dir.path();
  // Three entries of 3000 bytes; "b" is the oldest by its newest file.
  write(d + "/a.cubin", 2000, 300);
  write(d + "/a.name", 1000, 100);
  write(d + "/b.cubin", 2000, 400);
  write(d + "/b.name", 1000, 350);
  write(d + "/c.cubin", 3000, 200);
  write(d + "/notes.txt", 50000, 1000);  // not an entry
  write(d + "/tmp-abc123.cubin", 50000, 1000);  // being written
  uint64_t removed =
      detail::evict_cache_entries(d, {"cubin", "name", "cu"}, 7000);
  EXPECT_EQ(removed, 3000u);
  EXPECT_FALSE(fs::exists(d + "/b.cubin"));
  EXPECT_FALSE(fs::exists(d + "/b.name"));
  EXPECT_TRUE(fs::exists(d + "/a.cubin"));
  EXPECT_TRUE(fs::exists(d + "/a.name"));
  EXPECT_TRUE(fs::exists(d + "/c.cubin"));
  EXPECT_TRUE(fs::exists(d + "/notes.txt"));
  EXPECT_TRUE(fs::exists(d + "/tmp-abc123.cubin"));
  // Under the limit: nothing goes.
  EXPECT_EQ(detail::evict_cache_entries(d, {"cubin", "name"}, 6000), 0u);
  // A touched entry is the newest: the untouched one goes.
  detail::touch_file(d + "/c.cubin");
  EXPECT_EQ(detail::evict_cache_entries(d, {"cubin", "name"}, 3500), 3000u);
  EXPECT_FALSE(fs::exists(d + "/a.cubin"));
  EXPECT_TRUE(fs::exists(d + "/c.cubin"));
}

TEST(JitEvict, LimitComesFromTheEnvironment) {
  {
    ScopedEnv e("KILN_CACHE_LIMIT_MB", "3");
    EXPECT_EQ(detail::cache_limit_bytes(), uint64_t(3) << 20);
  }
  {
    ScopedEnv e("KILN_CACHE_LIMIT_MB", "0");  // unlimited
    EXPECT_EQ(detail::cache_limit_bytes(), 0u);
    TempDir dir;
    write(dir.path() + "/x.so", 100, 10);
    EXPECT_EQ(detail::evict_cache_entries(dir.path(), {"so"}, 0), 0u);
  }
  {
    ScopedEnv e("KILN_CACHE_LIMIT_MB", "lots");  // not a number: default
    EXPECT_EQ(detail::cache_limit_bytes(), uint64_t(1024) << 20);
  }
}

using CpuJitEvict = JitTest;

// The CPU JIT keeps its directory under the limit as it compiles: an old
// entry past the limit goes when a new kernel is written.
TEST_F(CpuJitEvict, CompilingRemovesOldEntriesPastTheLimit) {
  ScopedEnv limit("KILN_CACHE_LIMIT_MB", "1");
  const std::string d = cache_dir();
  write(d + "/cpu-old.so", 2 << 20, 1000);
  write(d + "/cpu-old.cpp", 100, 1000);
  auto before = detail::jit_stats();
  auto f = compile([](const std::vector<array>& in) {
    return std::vector<array>{multiply(cos(add(in[0], array(0.3125f))), in[0])};
  });
  auto x = random_array({64}, float32);
  auto got = f({x})[0];
  eval(got);
  ASSERT_EQ(detail::jit_stats().compiles, before.compiles + 1);
  EXPECT_FALSE(fs::exists(d + "/cpu-old.so"));
  EXPECT_FALSE(fs::exists(d + "/cpu-old.cpp"));
  int libraries = 0;
  for (auto& e : fs::directory_iterator(d)) {
    libraries += e.path().extension() == ".so";
  }
  EXPECT_EQ(libraries, 1);
  auto want = multiply(cos(add(x, array(0.3125f))), x);
  EXPECT_TRUE(all_close(to_doubles(got), to_doubles(want), 1e-6, 1e-6));
}

} // namespace
} // namespace kiln::test
