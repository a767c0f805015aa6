// Toolkit libraries loaded at run time (dlopen), so they are no link
// dependency of kiln: cuFFT, cuSOLVER and cuBLAS (for what cuBLASLt
// lacks); without one, the primitives it serves run on the CPU. In the JIT
// build the CUDA runtime, cuBLASLt and NVRTC too (toolkit_symbols.cpp):
// without them the GPU is unavailable and toolkit_missing() says why.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace kiln::cuda {

/** The first library that loads and passes `accept` (which resolves its
 *  entry points), tried as: the path in environment variable `env` when
 *  set (and nothing else then); else each soname in the lib/ of each root
 *  in $KILN_CUDA_PATH (':'-separated; the Python package lists NVIDIA's
 *  wheels there, site-packages/nvidia/cu13), on the loader's path,
 *  and in the toolkit's library directory. Null when none does. The
 *  library stays loaded. */
void* open_toolkit_library(const char* env,
                           std::initializer_list<const char*> sonames,
                           const std::function<bool(void*)>& accept);

/** The libraries the GPU cannot run without. */
enum class ToolkitPart { runtime, blas_lt, nvrtc };

/** The loaded library of `part` (opened on first call), or null. */
void* toolkit_part(ToolkitPart part);

/** What of the toolkit is missing for the GPU to run (the libraries, and
 *  the headers NVRTC compiles kernels against), as a sentence naming the
 *  files and the pip packages that hold them; empty when nothing is. */
const std::string& toolkit_missing();

/** The include directories NVRTC needs (the toolkit's include/ and its
 *  include/cccl/), or empty when no candidate holds them. */
const std::vector<std::string>& nvrtc_include_dirs();

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
