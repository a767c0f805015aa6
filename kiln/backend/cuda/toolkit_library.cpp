#include "kiln/backend/cuda/toolkit_library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace kiln::cuda {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// KILN_CUDA_PATH: toolkit roots (lib/ and include/ inside), ':'-separated.
std::vector<std::string> cuda_path() {
  std::vector<std::string> roots;
  std::string list = env("KILN_CUDA_PATH");
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) roots.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return roots;
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

#define KILN_SONAME(lib) lib KILN_CUDA_MAJOR

struct PartInfo {
  const char* env;
  const char* soname;
  const char* package; // the pip package that holds it
};

const PartInfo& info(ToolkitPart part) {
  static const PartInfo parts[] = {
      {"KILN_CUDART_LIBRARY", KILN_SONAME("libcudart.so."),
       "nvidia-cuda-runtime"},
      {"KILN_CUBLASLT_LIBRARY", KILN_SONAME("libcublasLt.so."),
       "nvidia-cublas"},
      {"KILN_NVRTC_LIBRARY", KILN_SONAME("libnvrtc.so."),
       "nvidia-cuda-nvrtc"},
  };
  return parts[static_cast<int>(part)];
}

} // namespace

void* open_toolkit_library(const char* env_name,
                           std::initializer_list<const char*> sonames,
                           const std::function<bool(void*)>& accept) {
  std::vector<std::string> names;
  // A library the user names is the one used, or none: never another.
  if (std::string path = env(env_name); !path.empty()) {
    names.push_back(path);
  } else {
    for (const char* so : sonames) {
      for (auto& root : cuda_path()) names.push_back(root + "/lib/" + so);
      names.push_back(so);
      names.push_back(std::string(KILN_CUDA_LIBRARY_DIR) + "/" + so);
    }
  }
  for (const auto& name : names) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    if (accept(lib)) return lib;
    dlclose(lib);
  }
  return nullptr;
}

bool resolve_symbol(void* lib, const char* name, void*& f) {
  f = dlsym(lib, name);
  return f != nullptr;
}

void* toolkit_part(ToolkitPart part) {
  static void* libs[3] = {};
  static const bool opened = [] {
    for (int i = 0; i < 3; ++i) {
      const PartInfo& p = info(static_cast<ToolkitPart>(i));
      libs[i] = open_toolkit_library(p.env, {p.soname},
                                     [](void*) { return true; });
    }
    return true;
  }();
  (void)opened;
  return libs[static_cast<int>(part)];
}

// Environment first, then the toolkit kiln was built against; a root
// counts when it holds include/ and CCCL's include/cccl/.
const std::vector<std::string>& nvrtc_include_dirs() {
  static const std::vector<std::string> dirs = [] {
    std::vector<std::string> roots;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      if (std::string v = env(var); !v.empty()) roots.push_back(v + "/include");
    }
    for (auto& root : cuda_path()) roots.push_back(root + "/include");
    roots.push_back(KILN_CUDA_INCLUDE_DIR);
    roots.push_back("/usr/local/cuda/include");
    for (auto& r : roots) {
      if (is_dir(r) && is_dir(r + "/cccl")) {
        return std::vector<std::string>{r, r + "/cccl"};
      }
    }
    return std::vector<std::string>{};
  }();
  return dirs;
}

const std::string& toolkit_missing() {
  static const std::string missing = [] {
    std::string files, packages;
    auto add = [&](const std::string& file, const std::string& package) {
      files += (files.empty() ? "" : ", ") + file;
      packages += (packages.empty() ? "" : " ") + package;
    };
    for (int i = 0; i < 3; ++i) {
      const PartInfo& p = info(static_cast<ToolkitPart>(i));
      if (!toolkit_part(static_cast<ToolkitPart>(i))) add(p.soname, p.package);
    }
    if (nvrtc_include_dirs().empty()) {
      add("the CUDA headers (include/ with include/cccl/)",
          "nvidia-cuda-runtime nvidia-cuda-cccl");
    }
    if (files.empty()) return std::string();
    return "the CUDA libraries kiln's GPU backend loads were not found: " +
           files + " (pip install 'kiln[cuda13]', or pip install " + packages +
           ", or set KILN_CUDA_PATH to a CUDA toolkit)";
  }();
  return missing;
}

} // namespace kiln::cuda
