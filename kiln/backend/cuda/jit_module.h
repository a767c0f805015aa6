// NVRTC: compiles a kernel instantiation to a cubin for this device's
// architecture (machine code, not PTX), cached in memory by name and on disk
// by a hash of everything that shapes the binary. Each kernel compiles once
// even when several threads ask for it at the same time; different kernels
// compile in parallel.
#pragma once

#include <cuda.h>

#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {

struct JitKernel {
  /** Unique name, e.g. "vExpfloat32" ({v|g}{op}{dtype}). */
  std::string name;
  /** Source text; usually one #include of a device header. */
  std::string source;
  /** The instantiation, e.g. "kiln::cuda::unary_v<kiln::cuda::Exp, float,
   *  float, 4>"; its lowered (mangled) name is looked up after compiling. */
  std::string expression;
  /** Other variants (name, expression) compiled in the same NVRTC program:
   *  parsing the headers dominates a compile, so a family's variants for one
   *  op and dtype cost about what one does. They are cached by name too. */
  std::vector<std::pair<std::string, std::string>> siblings;
  /** Whether fast_compile_options() apply (fused kernels). */
  bool fast_compile = false;
};

/** The extra NVRTC options of a fast_compile kernel: none by default;
 *  --Ofast-compile=min with KILN_JIT_FAST_COMPILE=1. On an H200 that takes a
 *  new fused kernel's first call from 73 to 57 ms, but its kernels run up
 *  to a quarter slower (bfloat16 rows kernels 31 -> 40 us), so it is not
 *  the default. */
const std::vector<std::string>& fast_compile_options();

/** The compiled kernel (compiling or reading the disk cache on first use). */
CUfunction jit_function(const JitKernel& k);

/** Compiles k for an architecture such as "sm_90" and returns the cubin,
 *  bypassing the caches; needs no GPU (CI checks the device headers with
 *  it). Throws std::runtime_error with NVRTC's log on failure. */
std::string jit_compile(const JitKernel& k, const std::string& arch);

/** Statistics of this process, for tests: NVRTC compiles run, kernels read
 *  from the disk cache, and disk entries refused as corrupt. */
struct JitStats {
  int compiles = 0;
  int disk_hits = 0;
  int disk_rejected = 0;
};
JitStats jit_stats();

/** Forgets the in-memory cache (tests: the next lookup goes to disk). */
void jit_clear_memory_cache();

/** The directory holding the CUDA disk cache ("" when disabled). */
std::string jit_cache_dir();

} // namespace kiln::cuda
