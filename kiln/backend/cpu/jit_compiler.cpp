#include "kiln/backend/cpu/jit_compiler.h"

#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "kiln/backend/common/jit_disk.h"
#include "kiln/backend/cpu/jit_toolchain.h"
#include "kiln/config.h"
#include "kiln/core/env.h"
#include "kiln/core/compile_log.h"

namespace kiln::detail {

// Generated at build time from jit_prelude.h, half_bits.h and the functor
// headers.
extern const char* const jit_prelude_text;
extern const char* const jit_functors_text;

namespace {

// No -ffast-math: it would drop the functors' NaN/Inf checks. The SIMD
// declarations reach libmvec without it; -fno-math-errno and
// -fno-trapping-math keep IEEE results while letting loops vectorize, and
// -ffp-contract=off keeps a * b + c two roundings, as the unfused ops do.
const std::vector<std::string>& compile_flags() {
  static const std::vector<std::string> flags = {
      "-std=c++20", "-O3", "-march=native", "-fno-math-errno",
      "-fno-trapping-math", "-ffp-contract=off", "-fno-exceptions", "-fPIC",
      "-shared", "-pipe", "-w"};
  return flags;
}

struct Config {
  std::vector<std::string> compiler; // $CXX split into words, resolved
  std::string compiler_id;           // path, size and mtime of the binary
  std::string libmvec;               // linked when SIMD forms are declared
  std::string math_decls;
  std::string cpu;
  std::string dir;
};

void warn(const std::string& msg) { std::cerr << "[kiln] " << msg << "\n"; }

std::shared_ptr<const Config> probe() {
  auto cfg = std::make_shared<Config>();
  std::string cxx = env::value("CXX");
  std::vector<std::string> words;
  std::stringstream ss(cxx);
  for (std::string w; ss >> w;) words.push_back(w);
  std::string path;
  if (!words.empty()) {
    path = find_program(words[0]);
    if (path.empty()) {
      warn("CXX=" + cxx +
           " was not found: fused regions run as separate "
           "ops (slower).");
    }
  } else {
    for (const char* c : {"g++", "c++", "clang++"}) {
      path = find_program(c);
      if (!path.empty()) break;
    }
    if (path.empty()) {
      warn("no C++ compiler found (CXX, g++, c++, clang++): fused regions "
           "run as separate ops (slower).");
    }
    words = {""};
  }
  if (path.empty()) return cfg;
  words[0] = path;
  cfg->compiler = words;
  cfg->compiler_id = program_id(path);
  for (size_t i = 1; i < words.size(); ++i) cfg->compiler_id += " " + words[i];
  cfg->math_decls = math_declarations(cfg->libmvec);
  cfg->cpu = cpu_features();
  std::string dir = default_cache_dir();
  std::string why = make_private_dir(dir);
  if (why.empty()) {
    cfg->dir = dir;
  } else {
    cfg->dir = make_temp_dir();
    warn("not using the kernel cache directory '" + dir + "': " + why +
         "; kernels go to a private temporary directory" +
         (cfg->dir.empty() ? " (none could be made)." : " " + cfg->dir + "."));
    if (cfg->dir.empty()) cfg->compiler.clear();
  }
  return cfg;
}

std::mutex config_mutex;
std::shared_ptr<const Config> config_ptr;

std::shared_ptr<const Config> config() {
  std::lock_guard<std::mutex> lock(config_mutex);
  if (!config_ptr) config_ptr = probe();
  return config_ptr;
}

std::atomic<size_t> n_compiles{0}, n_disk_loads{0}, n_failures{0};

std::mutex filter_mutex;
std::function<std::string(const std::string&)> source_filter;

// Opens a library and checks it is the entry it claims to be: its marker
// returns the entry's hash and it defines the kernel's symbol.
JitKernel open_library(const std::string& path, const std::string& entry,
                       const std::string& symbol, std::string& error) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    error = e ? e : "dlopen failed";
    return nullptr;
  }
  using Marker = const char* (*)();
  auto marker = reinterpret_cast<Marker>(::dlsym(h, "kiln_jit_entry"));
  auto fn = reinterpret_cast<JitKernel>(::dlsym(h, symbol.c_str()));
  if (!marker || entry != marker() || !fn) {
    error = "the library is not the expected kernel";
    // Nothing of it ran or was handed out, so it can be unloaded (a later
    // dlopen of a rebuilt file must not find this one by name).
    ::dlclose(h);
    return nullptr;
  }
  // Never dlclosed: threads may still run kernels at exit.
  return fn;
}

// One kernel's files: <entry>.cpp (kept, readable) and <entry>.so, named by
// a hash of everything the binary depends on.
struct Entry {
  std::string symbol, body, source, name, cpp, so;
};

Entry make_entry(const Config& cfg, const JitKernelSpec& spec,
                 const std::string& key) {
  Entry e;
  e.symbol = jit_kernel_symbol(spec, key);
  e.body = jit_kernel_source(spec, key, e.symbol);
  e.source = std::string(jit_prelude_text) + cfg.math_decls +
             jit_functors_text + e.body;
  {
    std::lock_guard<std::mutex> lock(filter_mutex);
    if (source_filter) e.source = source_filter(e.source);
  }
  std::string flags;
  for (auto& f : compile_flags()) flags += f + " ";
  std::string id = e.source + '\0' + cfg.compiler_id + '\0' + flags + '\0' +
                   cfg.libmvec + '\0' + KILN_VERSION + '\0' + cfg.cpu;
  e.name = "cpu-" + jit_digest(id);
  e.source += "\nextern \"C\" const char* kiln_jit_entry() { return \"" +
              e.name + "\"; }\n";
  e.cpp = cfg.dir + "/" + e.name + ".cpp";
  e.so = cfg.dir + "/" + e.name + ".so";
  return e;
}

// Writes the source, compiles it to a temporary library, checks and loads
// that, and only then renames it into place. nullptr (and a warning) on
// failure.
JitKernel compile_entry(const Config& cfg, const Entry& e) {
  std::string tmp;
  if (!write_file_atomic(e.cpp, e.source) ||
      (tmp = make_temp_file(cfg.dir, "tmp-", ".so")).empty()) {
    warn("cannot write kernel files in " + cfg.dir + ": " +
         std::strerror(errno) + "; running the fused ops unfused.");
    return nullptr;
  }
  std::vector<std::string> argv = cfg.compiler;
  argv.insert(argv.end(), compile_flags().begin(), compile_flags().end());
  argv.insert(argv.end(), {"-o", tmp, e.cpp});
  if (!cfg.libmvec.empty()) argv.push_back(cfg.libmvec);
  std::string output, error;
  int rc = run_program(argv, output);
  JitKernel fn = nullptr;
  if (rc == 0 && seal_library(tmp)) {
    fn = open_library(tmp, e.name, e.symbol, error);
  } else {
    error = "the compiler failed (exit " + std::to_string(rc) + "):\n" +
            output.substr(0, 4000);
  }
  if (!fn) {
    ::unlink(tmp.c_str());
    warn("building fused kernel " + e.symbol + " from " + e.cpp +
         " failed; its ops run unfused. " + error);
    return nullptr;
  }
  if (::rename(tmp.c_str(), e.so.c_str()) != 0) {
    // Something else holds the entry's name (a directory, say): the kernel
    // is loaded and runs, but it is not cached.
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    warn("cannot store fused kernel " + e.symbol + " as " + e.so + ": " +
         why + "; it is rebuilt in each process.");
  }
  return fn;
}

JitKernel build(const JitKernelSpec& spec, const std::string& key) {
  auto cfg = config();
  if (cfg->compiler.empty()) {
    ++n_failures;
    return nullptr;
  }
  Entry e = make_entry(*cfg, spec, key);
  auto log = [&](const std::string& how) {
    compile_log(1, "jit kernel " + e.symbol + " " + how + ": " + e.cpp);
    if (env::debug_level() >= 4) compile_log(4, e.body);
  };
  std::string error;
  if (library_intact(e.so)) {
    if (JitKernel fn = open_library(e.so, e.name, e.symbol, error)) {
      touch_file(e.so);
      ++n_disk_loads;
      log("(disk cache)");
      return fn;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  JitKernel fn = compile_entry(*cfg, e);
  if (!fn) {
    ++n_failures;
    return nullptr;
  }
  ++n_compiles;
  auto ms = std::chrono::duration<double, std::milli>(
                std::chrono::steady_clock::now() - t0)
                .count();
  log("(built in " + std::to_string(static_cast<int>(ms)) + " ms)");
  evict_cache_entries(cfg->dir, {"so", "cpp"}, cache_limit_bytes());
  return fn;
}

// Kernels by key. A future per key: the first user builds, later ones wait
// for it, and different keys build in parallel.
std::shared_mutex cache_mutex;
std::unordered_map<std::string, std::shared_future<JitKernel>> kernels;

} // namespace

JitKernel jit_kernel(const JitKernelSpec& spec) {
  std::string key = jit_kernel_key(spec);
  std::shared_future<JitKernel> found;
  {
    std::shared_lock<std::shared_mutex> lock(cache_mutex);
    auto it = kernels.find(key);
    if (it != kernels.end()) found = it->second;
  }
  if (found.valid()) return found.get();
  std::promise<JitKernel> promise;
  {
    std::unique_lock<std::shared_mutex> lock(cache_mutex);
    auto [it, inserted] = kernels.emplace(key, promise.get_future().share());
    if (!inserted) found = it->second;
  }
  if (found.valid()) return found.get();
  JitKernel fn = nullptr;
  try {
    fn = build(spec, key);
  } catch (const std::exception& e) {
    ++n_failures;
    warn(std::string("building a fused kernel failed: ") + e.what());
  }
  promise.set_value(fn);
  return fn;
}

JitStats jit_stats() {
  return {n_compiles.load(), n_disk_loads.load(), n_failures.load()};
}

void jit_reset() {
  {
    std::lock_guard<std::mutex> lock(config_mutex);
    config_ptr.reset();
  }
  std::unique_lock<std::shared_mutex> lock(cache_mutex);
  kernels.clear();
}

std::string jit_cache_dir() {
  auto cfg = config();
  return cfg->compiler.empty() ? "" : cfg->dir;
}

void jit_set_source_filter(std::function<std::string(const std::string&)> f) {
  {
    std::lock_guard<std::mutex> lock(filter_mutex);
    source_filter = std::move(f);
  }
  // Kernels built with the old filter must not be found by key.
  std::unique_lock<std::shared_mutex> lock(cache_mutex);
  kernels.clear();
}

} // namespace kiln::detail
