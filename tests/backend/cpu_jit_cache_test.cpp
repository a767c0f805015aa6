// The CPU JIT's caches: a second process loads kernels from disk, corrupt
// or foreign files are rebuilt, the directory is private (created 0700,
// refused when shared), concurrent first use compiles once, and the
// fallbacks (no compiler, KILN_COMPILE_CHECK) behave.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend/jit_fixture.h"
#include "kiln/backend/common/jit_disk.h"
#include "run_self.h"
#include "kiln/primitives/compiled.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using CpuJitCache = JitTest;

std::vector<array> disk_fn(const std::vector<array>& in) {
  return {multiply(sin(add(in[0], array(0.75f))), in[0])};
}

array disk_input() {
  std::vector<float> v = {0.5f, -1.25f, 2.0f, 3.5f, -0.125f, 7.0f};
  return array(v.begin(), {6}, float32);
}

std::vector<double> disk_want() {
  return map1(to_doubles(disk_input()), [](double x) {
    return static_cast<double>(std::sin(static_cast<float>(x) + 0.75f)) * x;
  });
}

// The child half of SecondProcessLoadsFromDisk (skipped in a normal run).
TEST(CpuJitChild, LoadsFromDisk) {
  const char* out = std::getenv("KILN_JIT_TEST_CHILD");
  if (!out) GTEST_SKIP() << "runs as a child of SecondProcessLoadsFromDisk";
  DefaultDeviceScope on_cpu(Device::cpu);
  detail::jit_reset();
  auto got = compile(disk_fn)({disk_input()})[0];
  bool ok = all_close(to_doubles(got), disk_want(), 1e-6, 1e-6);
  auto st = detail::jit_stats();
  std::ofstream(out) << st.compiles << " " << st.disk_loads << " " << ok;
}

TEST_F(CpuJitCache, SecondProcessLoadsFromDisk) {
  auto before = detail::jit_stats();
  auto got = compile(disk_fn)({disk_input()})[0];
  EXPECT_TRUE(all_close(to_doubles(got), disk_want(), 1e-6, 1e-6));
  EXPECT_EQ(detail::jit_stats().compiles, before.compiles + 1);
  std::string out = cache_dir() + "/child.txt";
  int rc =
      run_self("CpuJitChild.LoadsFromDisk",
               {"KILN_JIT_TEST_CHILD=" + out, "KILN_CACHE_DIR=" + cache_dir()});
  ASSERT_EQ(rc, 0);
  size_t compiles = 9, loads = 9;
  int ok = 0;
  std::ifstream(out) >> compiles >> loads >> ok;
  EXPECT_EQ(compiles, 0u); // nothing compiled in the child
  EXPECT_EQ(loads, 1u);    // its kernel came from the disk cache
  EXPECT_EQ(ok, 1);
}

std::vector<fs::path> libraries(const std::string& dir) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".so") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Replaces a file through a new inode, as another process would.
void replace_file(const fs::path& p, const std::string& data) {
  fs::path tmp = p.string() + ".new";
  std::ofstream(tmp, std::ios::binary) << data;
  fs::rename(tmp, p);
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST_F(CpuJitCache, CorruptTruncatedOrForeignLibrariesAreRebuilt) {
  TempDir dir;
  ScopedEnv env("KILN_CACHE_DIR", dir.path().c_str());
  detail::jit_reset();
  auto other = [](const std::vector<array>& in) {
    return std::vector<array>{cos(multiply(in[0], array(2.5f)))};
  };
  compile(other)({disk_input()})[0].eval();
  auto first = libraries(dir.path());
  ASSERT_EQ(first.size(), 1u);
  std::string foreign = read_all(first[0]);
  compile(disk_fn)({disk_input()})[0].eval();
  fs::path lib;
  for (auto& p : libraries(dir.path())) {
    if (p != first[0]) lib = p;
  }
  ASSERT_FALSE(lib.empty());
  std::string good = read_all(lib);

  auto reload = [&](const std::string& contents) {
    replace_file(lib, contents);
    detail::jit_reset(); // forget the kernel in memory
    auto before = detail::jit_stats();
    auto got = compile(disk_fn)({disk_input()})[0];
    EXPECT_TRUE(all_close(to_doubles(got), disk_want(), 1e-6, 1e-6));
    auto after = detail::jit_stats();
    EXPECT_EQ(read_all(lib), good); // rebuilt: the same bytes as before
    return std::make_pair(after.compiles - before.compiles,
                          after.disk_loads - before.disk_loads);
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x5a;
  EXPECT_EQ(reload(flipped), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(reload(good.substr(0, good.size() / 3)),
            std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(reload(""), std::make_pair(size_t{1}, size_t{0}));
  // A valid library of another kernel under this name: not ours.
  EXPECT_EQ(reload(foreign), std::make_pair(size_t{1}, size_t{0}));
  // The intact file loads.
  EXPECT_EQ(reload(good), std::make_pair(size_t{0}, size_t{1}));
  detail::jit_reset();
}

mode_t mode_of(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// The library of disk_fn in dir, built on first use.
fs::path disk_fn_library(const std::string& dir) {
  detail::jit_reset();
  compile(disk_fn)({disk_input()})[0].eval();
  auto libs = libraries(dir);
  return libs.size() == 1 ? libs[0] : fs::path();
}

// Compiles disk_fn again with nothing in memory: (compiles, disk loads).
std::pair<size_t, size_t> rebuild_counts() {
  detail::jit_reset();
  auto before = detail::jit_stats();
  auto got = compile(disk_fn)({disk_input()})[0];
  EXPECT_TRUE(all_close(to_doubles(got), disk_want(), 1e-6, 1e-6));
  auto after = detail::jit_stats();
  return {after.compiles - before.compiles,
          after.disk_loads - before.disk_loads};
}

TEST_F(CpuJitCache, ResealedLibrariesAreRebuilt) {
  TempDir dir;
  ScopedEnv env("KILN_CACHE_DIR", dir.path().c_str());
  fs::path lib = disk_fn_library(dir.path());
  ASSERT_FALSE(lib.empty());
  std::string good = read_all(lib);
  ASSERT_GT(good.size(), 16u);
  EXPECT_TRUE(fs::exists(dir.path() + "/mac-key"));
  EXPECT_EQ(mode_of(dir.path() + "/mac-key") & 077, 0u);
  // The body sealed again with an unkeyed hash (what anyone can compute):
  // refused, since the MAC needs the directory's key.
  std::string body = good.substr(0, good.size() - 16);
  uint64_t h = detail::jit_hash(body);
  for (const char* magic : {"KILNJIT1", "KILNJIT2"}) {
    std::string resealed = body + magic;
    resealed.append(reinterpret_cast<const char*>(&h), 8);
    replace_file(lib, resealed);
    EXPECT_EQ(rebuild_counts(), std::make_pair(size_t{1}, size_t{0}));
    EXPECT_EQ(read_all(lib), good);
  }
  EXPECT_EQ(rebuild_counts(), std::make_pair(size_t{0}, size_t{1}));
  detail::jit_reset();
}

TEST_F(CpuJitCache, OnlyRegularFilesAreRead) {
  TempDir dir;
  ScopedEnv env("KILN_CACHE_DIR", dir.path().c_str());
  fs::path lib = disk_fn_library(dir.path());
  ASSERT_FALSE(lib.empty());
  std::string good = read_all(lib);
  // A FIFO in the library's place: opening it must not wait for a writer.
  fs::remove(lib);
  ASSERT_EQ(::mkfifo(lib.c_str(), 0600), 0);
  EXPECT_EQ(rebuild_counts(), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(read_all(lib), good); // the rebuilt library took its place
  // A symbolic link to the intact library (elsewhere) is not followed.
  fs::path elsewhere = fs::path(dir.path()) / "elsewhere.bin";
  fs::rename(lib, elsewhere);
  fs::create_symlink(elsewhere, lib);
  EXPECT_EQ(rebuild_counts(), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_FALSE(fs::is_symlink(lib));
  // A directory in its place: the kernel still builds and runs, with a
  // warning, and no temporary file is left behind.
  fs::remove(lib);
  fs::create_directories(lib / "inside");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(rebuild_counts(), std::make_pair(size_t{1}, size_t{0}));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot store"), std::string::npos) << err;
  for (auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_NE(e.path().filename().string().rfind("tmp-", 0), 0u) << e.path();
  }
  detail::jit_reset();
}

TEST_F(CpuJitCache, DirectoryIsCreatedPrivate) {
  TempDir dir;
  std::string path = dir.path() + "/new/kiln";
  mode_t old = ::umask(022);
  ScopedEnv env("KILN_CACHE_DIR", path.c_str());
  detail::jit_reset();
  compile(disk_fn)({disk_input()})[0].eval();
  ::umask(old);
  EXPECT_EQ(detail::jit_cache_dir(), path);
  EXPECT_EQ(mode_of(path), 0700u);
  EXPECT_EQ(mode_of(dir.path() + "/new"), 0700u);
  EXPECT_EQ(libraries(path).size(), 1u);
  detail::jit_reset();
}

// A directory that is shared or not ours is refused: kernels go to a
// private temporary directory instead, and results stay right.
void expect_refused(const std::string& path) {
  ScopedEnv env("KILN_CACHE_DIR", path.c_str());
  detail::jit_reset();
  ::testing::internal::CaptureStderr();
  auto got = compile(disk_fn)({disk_input()})[0];
  EXPECT_TRUE(all_close(to_doubles(got), disk_want(), 1e-6, 1e-6));
  std::string err = ::testing::internal::GetCapturedStderr();
  std::string used = detail::jit_cache_dir();
  EXPECT_NE(used, path);
  EXPECT_FALSE(used.empty());
  EXPECT_EQ(mode_of(used), 0700u);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  if (fs::is_directory(path)) EXPECT_TRUE(libraries(path).empty());
  std::error_code ec;
  fs::remove_all(used, ec);
  detail::jit_reset();
}

TEST_F(CpuJitCache, SharedOrForeignDirectoriesAreRefused) {
  TempDir dir;
  std::string shared = dir.path() + "/shared";
  fs::create_directory(shared);
  ::chmod(shared.c_str(), 0770);
  expect_refused(shared);
  ::chmod(shared.c_str(), 0702);
  expect_refused(shared);
  // A symbolic link, even to a good directory.
  std::string good = dir.path() + "/good", link = dir.path() + "/link";
  fs::create_directory(good);
  ::chmod(good.c_str(), 0700);
  fs::create_directory_symlink(good, link);
  expect_refused(link);
  // A regular file.
  std::ofstream(dir.path() + "/file") << "x";
  expect_refused(dir.path() + "/file");
  // Owned by another user (needs root to arrange).
  if (::getuid() == 0) {
    std::string theirs = dir.path() + "/theirs";
    fs::create_directory(theirs);
    ::chmod(theirs.c_str(), 0700);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    expect_refused(theirs);
  }
}

TEST_F(CpuJitCache, ConcurrentFirstUseCompilesOnce) {
  // Evaluations are serialized, so ask the kernel cache directly: four
  // threads want the same new kernel (exp(a) * b + 0.8125) at once.
  auto a = random_array({4}, float32), b = random_array({4}, float32);
  auto e = exp(a);
  auto m = multiply(e, b);
  auto c = add(m, array(0.8125f));
  std::vector<FusedOp> ops = {{e.primitive_ptr(), {-1}, float32},
                              {m.primitive_ptr(), {0, -2}, float32},
                              {c.primitive_ptr(), {1, -3}, float32}};
  FusedConstant k{float32, 0};
  float kv = 0.8125f;
  std::memcpy(&k.bits, &kv, 4);
  Compiled region(e.primitive().stream(), ops, {2},
                  {std::nullopt, std::nullopt, k});
  using detail::JitRole;
  detail::JitKernelSpec spec{&region,
                             {float32, float32, float32},
                             {JitRole::vector, JitRole::vector,
                              JitRole::constant},
                             true};
  auto before = detail::jit_stats();
  std::barrier sync(4);
  std::vector<detail::JitKernel> got(4, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      sync.arrive_and_wait();
      got[t] = detail::jit_kernel(spec);
    });
  }
  for (auto& th : threads) th.join();
  auto after = detail::jit_stats();
  EXPECT_EQ(after.compiles - before.compiles, 1u);
  EXPECT_EQ(after.disk_loads, before.disk_loads);
  ASSERT_NE(got[0], nullptr);
  for (auto fn : got) EXPECT_EQ(fn, got[0]);
  // The kernel itself: elements [1, 4) of a flat run.
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f}, y = {3, -2, 0.5f, 4};
  std::vector<float> out(4, -99.0f);
  const void* in[] = {x.data(), y.data(), nullptr};
  void* outs[] = {out.data()};
  got[0](in, outs, nullptr, nullptr, 0, 1, 4);
  EXPECT_EQ(out[0], -99.0f);
  for (int i = 1; i < 4; ++i) {
    EXPECT_NEAR(out[i], std::exp(x[i]) * y[i] + 0.8125f, 1e-5) << i;
  }
}

TEST_F(CpuJitCache, WithoutCompilerRegionsRunUnfused) {
  ScopedEnv cxx("CXX", "/nonexistent/kiln-test-c++");
  detail::jit_reset();
  ::testing::internal::CaptureStderr();
  auto before = detail::jit_stats();
  auto got = compile(disk_fn)({disk_input()})[0];
  auto got2 = compile(disk_fn)({disk_input()})[0];
  EXPECT_TRUE(all_close(to_doubles(got), disk_want(), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(to_doubles(got2), disk_want(), 1e-6, 1e-6));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(detail::jit_stats().compiles, before.compiles);
  // One warning, naming the missing compiler.
  size_t first = err.find("kiln-test-c++");
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("kiln-test-c++", first + 1), std::string::npos) << err;
  detail::jit_reset();
}

TEST_F(CpuJitCache, CompileCheckCatchesAWrongKernel) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{add(exp(in[0]), array(0.375f))};
  };
  auto x = random_array({16}, float32);
  detail::set_compile_check(true);
  EXPECT_NO_THROW(compile(f)({x})[0].eval());
  // A deliberately wrong kernel: Exp replaced by Sin in its source.
  detail::jit_set_source_filter([](const std::string& s) {
    std::string out = s;
    for (size_t p; (p = out.find("Exp{}(")) != std::string::npos;) {
      out.replace(p, 6, "Sin{}(");
    }
    return out;
  });
  try {
    compile(f)({x})[0].eval();
    ADD_FAILURE() << "the wrong kernel was not caught";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("KILN_COMPILE_CHECK"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Compiled{Exp Add}"), std::string::npos) << msg;
    EXPECT_NE(msg.find("output 0"), std::string::npos) << msg;
  }
  detail::jit_set_source_filter(nullptr);
  detail::set_compile_check(false);
  // Without the check the filter's kernel would have been used: it is gone.
  auto got = compile(f)({x})[0];
  EXPECT_TRUE(all_close(to_doubles(got), to_doubles(f({x})[0]), 1e-6, 1e-6));
}

} // namespace
} // namespace kiln::test
