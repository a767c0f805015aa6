// Shared by the CPU JIT tests: each suite builds its kernels in a private
// temporary cache directory (removed afterwards), and compares compiled
// functions with the same functions run op by op.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "kiln/backend/cpu/jit_compiler.h"
#include "test_utils.h"

namespace kiln::test {

/** Sets an environment variable for a scope, restoring it afterwards. */
class ScopedEnv {
public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

private:
  std::string name_, old_;
  bool had_ = false;
};

/** A fresh directory under the system temp directory, removed at the end. */
class TempDir {
public:
  TempDir() {
    auto base = std::filesystem::temp_directory_path() / "kiln-test-XXXXXX";
    std::string t = base.string();
    path_ = ::mkdtemp(t.data()) ? t : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

/** A test suite whose kernels go to its own cache directory. */
class JitTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    env_ = new ScopedEnv("KILN_CACHE_DIR", dir_->path().c_str());
    detail::jit_reset();
  }
  static void TearDownTestSuite() {
    delete env_;
    delete dir_;
    detail::jit_reset();
  }
  static const std::string& cache_dir() { return dir_->path(); }

  // These test the CPU's JIT: with a GPU as the default device, compiled
  // regions would run there instead.
  DefaultDeviceScope on_cpu_{Device::cpu};

private:
  static inline TempDir* dir_ = nullptr;
  static inline ScopedEnv* env_ = nullptr;
};

/** f compiled and f run op by op give the same outputs: exactly for
 *  integers and bool (and equal NaNs), within dtype tolerance for floats. */
inline void expect_matches_unfused(const Fn& f, const std::vector<array>& in,
                                   double scale = 4) {
  auto want = f(in);
  auto got = compile(f)(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].dtype(), want[k].dtype()) << "output " << k;
    EXPECT_EQ(got[k].shape(), want[k].shape()) << "output " << k;
    double tol = tolerance(want[k].dtype()) * scale;
    EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), tol, tol))
        << "output " << k << " (" << dtype_name(want[k].dtype()) << ")";
  }
}

} // namespace kiln::test
