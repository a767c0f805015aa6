#include "kiln/backend/cuda/jit_module.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "kiln/backend/common/jit_disk.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/device_sources.h"
#include "kiln/backend/cuda/toolkit_library.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/config.h"
#include "kiln/core/env.h"

namespace kiln::cuda {

namespace {

// NVRTC has no default include path: the toolkit's headers, and CCCL's
// libcu++ under include/cccl, must be named.
std::vector<std::string> include_options() {
  const auto& dirs = nvrtc_include_dirs();
  if (dirs.empty()) {
    throw std::runtime_error(
        "[jit] the CUDA headers NVRTC needs were not found (set CUDA_HOME to "
        "the toolkit, or pip install nvidia-cuda-runtime nvidia-cuda-cccl; "
        "looked for include/ and include/cccl/ there and in " +
        std::string(KILN_CUDA_INCLUDE_DIR) + ").");
  }
  std::vector<std::string> o;
  for (auto& d : dirs) o.push_back("--include-path=" + d);
  return o;
}

struct Options {
  std::vector<std::string> list;
  std::string fingerprint; // options, NVRTC version, headers, kiln version
};

const Options& options() {
  static const Options o = [] {
    Options o;
    o.list = {"-std=c++17"};
    for (auto& inc : include_options()) o.list.push_back(inc);
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    std::string fp = "nvrtc " + std::to_string(major) + "." +
                     std::to_string(minor) + '\0' + KILN_VERSION + '\0';
    for (auto& opt : o.list) fp += opt + '\0';
    for (auto& h : device_sources()) {
      fp += std::string(h.include_name) + '\0' + h.text + '\0';
    }
    o.fingerprint = fp;
    return o;
  }();
  return o;
}

} // namespace

const std::vector<std::string>& fast_compile_options() {
  static const std::vector<std::string> o = [] {
    if (env::flag("KILN_JIT_FAST_COMPILE", false)) {
      return std::vector<std::string>{"--Ofast-compile=min"};
    }
    return std::vector<std::string>{};
  }();
  return o;
}

namespace {

struct Compiled {
  std::string cubin;
  std::vector<std::string> lowered; // one per expression, in order
};

// (name, expression) of k and its siblings, k first.
std::vector<std::pair<std::string, std::string>> variants(const JitKernel& k) {
  std::vector<std::pair<std::string, std::string>> v = {{k.name, k.expression}};
  v.insert(v.end(), k.siblings.begin(), k.siblings.end());
  return v;
}

Compiled compile(const JitKernel& k, const std::string& arch) {
  auto& hs = device_sources();
  std::vector<const char*> names, texts;
  for (auto& h : hs) {
    names.push_back(h.include_name);
    texts.push_back(h.text);
  }
  nvrtcProgram prog;
  KILN_CHECK_NVRTC(nvrtcCreateProgram(&prog, k.source.c_str(),
                                      (k.name + ".cu").c_str(),
                                      static_cast<int>(hs.size()),
                                      texts.data(), names.data()));
  struct Guard {
    nvrtcProgram& p;
    ~Guard() { nvrtcDestroyProgram(&p); }
  } guard{prog};
  auto vs = variants(k);
  for (auto& [name, expr] : vs) {
    KILN_CHECK_NVRTC(nvrtcAddNameExpression(prog, expr.c_str()));
  }
  std::string arch_opt = "--gpu-architecture=" + arch;
  std::vector<const char*> opts = {arch_opt.c_str()};
  for (auto& o : options().list) opts.push_back(o.c_str());
  if (k.fast_compile) {
    for (auto& o : fast_compile_options()) opts.push_back(o.c_str());
  }
  nvrtcResult res =
      nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  if (res != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    if (n) nvrtcGetProgramLog(prog, log.data());
    throw std::runtime_error("[jit] NVRTC could not compile " + k.name +
                             " (" + k.expression + "):\n" + log);
  }
  Compiled c;
  size_t size = 0;
  KILN_CHECK_NVRTC(nvrtcGetCUBINSize(prog, &size));
  c.cubin.resize(size);
  KILN_CHECK_NVRTC(nvrtcGetCUBIN(prog, c.cubin.data()));
  for (auto& [name, expr] : vs) {
    const char* lowered = nullptr;
    KILN_CHECK_NVRTC(nvrtcGetLoweredName(prog, expr.c_str(), &lowered));
    c.lowered.push_back(lowered); // dies with the program: copy it
  }
  return c;
}

// Disk entries: <key>.cubin (the cubin plus the trailer of jit_disk.h, the
// CPU JIT's seal), <key>.name (the lowered name) and <key>.cu (the source,
// for readers). The cubin is written last, so its presence means the entry
// is complete.

class JitCache {
 public:
  CUfunction get(const JitKernel& k) {
    std::shared_future<CUfunction> fut;
    std::promise<CUfunction> promise;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = memory_.find(k.name);
      if (it != memory_.end()) {
        fut = it->second;
      } else {
        fut = promise.get_future().share();
        memory_.emplace(k.name, fut);
        mine = true;
      }
    }
    if (mine) {
      try {
        std::vector<CUfunction> fs = build(k);
        promise.set_value(fs[0]);
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t i = 0; i < k.siblings.size(); ++i) {
          if (memory_.count(k.siblings[i].first)) continue;
          std::promise<CUfunction> ready;
          ready.set_value(fs[i + 1]);
          memory_.emplace(k.siblings[i].first, ready.get_future().share());
        }
      } catch (...) {
        // Let a later call try again, and tell every waiter why.
        {
          std::lock_guard<std::mutex> lock(mutex_);
          memory_.erase(k.name);
        }
        promise.set_exception(std::current_exception());
      }
    }
    return fut.get();
  }

  JitStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void clear_memory() {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.clear();
  }

  std::string dir() {
    std::call_once(dir_once_, [this] {
      std::string d = detail::default_cache_dir();
      if (d.empty()) return;
      d += "/cuda";
      std::string why = detail::make_private_dir(d);
      if (!why.empty()) {
        if (env::debug_level() >= 1) {
          std::cerr << "[kiln jit] not caching CUDA kernels in " << d << ": "
                    << why << "\n";
        }
        return;
      }
      dir_ = d;
    });
    return dir_;
  }

 private:
  std::vector<CUfunction> build(const JitKernel& k) {
    set_current_device();
    cudaFree(nullptr); // makes the primary context current for the driver
    std::string arch = device_info().arch();
    std::string key = k.source + '\0' + arch + '\0' + options().fingerprint;
    if (k.fast_compile) {
      for (auto& o : fast_compile_options()) key += '\0' + o;
    }
    for (auto& [name, expr] : variants(k)) key += '\0' + expr;
    std::string stem = detail::jit_digest(key);
    std::string d = dir();
    std::string base = d.empty() ? "" : d + "/" + stem;
    if (!base.empty()) {
      auto fs = load_disk(base, k);
      if (!fs.empty()) {
        detail::touch_file(base + ".cubin");
        return fs;
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    Compiled c = compile(k, arch);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.compiles;
    }
    if (env::debug_level() >= 1) {
      std::cerr << "[kiln jit] compiled " << k.name << " (" << k.expression
                << ") in " << ms << " ms\n";
    }
    auto fs = load(c.cubin, c.lowered, k.name);
    if (fs.empty()) {
      throw std::runtime_error("[jit] the driver refused the cubin NVRTC "
                               "built for " + k.name + ".");
    }
    if (!base.empty()) {
      std::string names, source = k.source;
      for (auto& l : c.lowered) names += l + "\n";
      for (auto& [name, expr] : variants(k)) {
        source += "// " + name + ": " + expr + "\n";
      }
      detail::write_file_atomic(base + ".cu", source);
      detail::write_file_atomic(base + ".name", names);
      std::string sealed = detail::seal(base + ".cubin", c.cubin);
      if (!sealed.empty()) detail::write_file_atomic(base + ".cubin", sealed);
      detail::evict_cache_entries(d, {"cubin", "name", "cu"},
                                  detail::cache_limit_bytes());
    }
    return fs;
  }

  std::vector<CUfunction> load_disk(const std::string& base,
                                    const JitKernel& k) {
    std::string blob, names;
    if (::access((base + ".cubin").c_str(), F_OK) != 0) return {}; // absent
    std::vector<std::string> lowered;
    bool ok = detail::read_sealed(base + ".cubin", blob) &&
              detail::read_regular_file(base + ".name", names);
    if (ok) {
      std::istringstream in(names);
      for (std::string line; std::getline(in, line);) {
        if (!line.empty()) lowered.push_back(line);
      }
      ok = lowered.size() == variants(k).size();
    }
    std::vector<CUfunction> fs;
    if (ok) {
      fs = load(blob, lowered, k.name);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (fs.empty()) {
      ++stats_.disk_rejected;
      if (env::debug_level() >= 1) {
        std::cerr << "[kiln jit] ignoring a corrupt cache entry for "
                  << k.name << "\n";
      }
      return {};
    }
    ++stats_.disk_hits;
    return fs;
  }

  // Empty when the driver refuses the image or lacks a name.
  std::vector<CUfunction> load(const std::string& cubin,
                               const std::vector<std::string>& lowered,
                               const std::string& name) {
    std::string log;
    CUmodule mod = load_module_image(cubin.data(), &log);
    if (!mod) {
      if (env::debug_level() >= 1) {
        std::cerr << "[kiln jit] loading " << name << " failed: " << log
                  << "\n";
      }
      return {};
    }
    return module_functions(mod, lowered);
  }

  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<CUfunction>> memory_;
  JitStats stats_;
  std::once_flag dir_once_;
  std::string dir_;
};

JitCache& cache() {
  static JitCache* c = new JitCache; // outlives static destructors
  return *c;
}

} // namespace

CUfunction jit_function(const JitKernel& k) { return cache().get(k); }
std::string jit_compile(const JitKernel& k, const std::string& arch) {
  return compile(k, arch).cubin;
}
JitStats jit_stats() { return cache().stats(); }
void jit_clear_memory_cache() { cache().clear_memory(); }
std::string jit_cache_dir() { return cache().dir(); }

} // namespace kiln::cuda
