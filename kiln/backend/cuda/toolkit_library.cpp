#include "kiln/backend/cuda/toolkit_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace kiln::cuda {

void* open_toolkit_library(const char* env,
                           std::initializer_list<const char*> sonames,
                           const std::function<bool(void*)>& accept) {
  std::vector<std::string> names;
  if (const char* path = std::getenv(env)) names.push_back(path);
  for (const char* so : sonames) {
    names.push_back(so);
    names.push_back(std::string(KILN_CUDA_LIBRARY_DIR) + "/" + so);
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

} // namespace kiln::cuda
