// Toolkit libraries loaded at run time (dlopen), so they are no link
// dependency of kiln: cuFFT, cuSOLVER and cuBLAS (for what cuBLASLt
// lacks). Without one, the primitives it serves run on the CPU.
#pragma once

#include <functional>
#include <initializer_list>

namespace kiln::cuda {

/** The first library that loads and passes `accept` (which resolves its
 *  entry points), tried as: the path in environment variable `env` when
 *  set, then each soname from the loader's path and from the toolkit's
 *  library directory. Null when none does. The library stays loaded. */
void* open_toolkit_library(const char* env,
                           std::initializer_list<const char*> sonames,
                           const std::function<bool(void*)>& accept);

/** dlsym into f; false when the library lacks the symbol. */
bool resolve_symbol(void* lib, const char* name, void*& f);
template <typename F>
bool resolve(void* lib, const char* name, F& f) {
  void* p = nullptr;
  bool ok = resolve_symbol(lib, name, p);
  f = reinterpret_cast<F>(p);
  return ok;
}

} // namespace kiln::cuda
