#include "kiln/backend/cpu/jit_toolchain.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/backend/common/libm_table.h"

extern char** environ;

namespace kiln::detail {

namespace {

// The libm functions the functors call (the libm table), with their arity.
// Those libmvec provides in every x86 width are declared SIMD so GCC
// vectorizes them; the rest (sqrt, floor, ...) become instructions or scalar
// calls.
struct MathFn {
  const char* name;
  int arity;
};
#define KILN_MATH_FN(name, arity, cuda) {#name, arity},
constexpr MathFn math_fns[] = {KILN_LIBM_FUNCTIONS(KILN_MATH_FN)};
#undef KILN_MATH_FN

} // namespace

std::string find_program(const std::string& name) {
  auto runnable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return runnable(name) ? name : "";
  const char* env_path = std::getenv("PATH");
  std::string path =
      env_path && *env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(path);
  for (std::string dir; std::getline(ss, dir, ':');) {
    std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(p)) return p;
  }
  return "";
}

std::string program_id(const std::string& path) {
  char real[PATH_MAX];
  std::string r = ::realpath(path.c_str(), real) ? real : path;
  struct stat st;
  if (::stat(r.c_str(), &st) != 0) return r;
  return r + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtime);
}

std::string cpu_features() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(f, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  return model + "\n" + flags;
}

std::string math_declarations(std::string& libmvec) {
  void* mvec = nullptr;
#if defined(__x86_64__)
  mvec = ::dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
#endif
  auto has_simd = [&](const std::string& name, int arity, bool f32) {
    if (!mvec) return false;
    std::string v(arity, 'v');
    const char* widths32[] = {"bN4", "cN8", "dN8", "eN16"};
    const char* widths64[] = {"bN2", "cN4", "dN4", "eN8"};
    for (const char* w : f32 ? widths32 : widths64) {
      std::string sym = "_ZGV" + std::string(w) + v + "_" + name;
      if (!::dlsym(mvec, sym.c_str())) return false;
    }
    return true;
  };
  std::ostringstream os;
  bool any = false;
  for (auto& fn : math_fns) {
    std::string n = fn.name;
    bool v32 = has_simd(n + "f", fn.arity, true);
    bool v64 = has_simd(n, fn.arity, false);
    any |= v32 || v64;
    std::string p32 = fn.arity == 1 ? "float" : "float, float";
    std::string p64 = fn.arity == 1 ? "double" : "double, double";
    std::string a32 = fn.arity == 1 ? "float a" : "float a, float b";
    std::string a64 = fn.arity == 1 ? "double a" : "double a, double b";
    std::string args = fn.arity == 1 ? "a" : "a, b";
    os << "extern \"C\" float " << n << "f(" << p32 << ") noexcept"
       << (v32 ? " KILN_SIMD" : "") << ";\n"
       << "extern \"C\" double " << n << "(" << p64 << ") noexcept"
       << (v64 ? " KILN_SIMD" : "") << ";\n"
       << "namespace std {\ninline float " << n << "(" << a32
       << ") { return ::" << n << "f(" << args << "); }\ninline double " << n
       << "(" << a64 << ") { return ::" << n << "(" << args << "); }\n}\n";
  }
  if (any) {
    Dl_info info;
    void* sym = ::dlsym(mvec, "_ZGVbN2v_exp");
    if (sym && ::dladdr(sym, &info) && info.dli_fname) libmvec = info.dli_fname;
  }
  return os.str();
}

int run_program(const std::vector<std::string>& argv, std::string& output) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc =
      ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    output = std::string("cannot start ") + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace kiln::detail
