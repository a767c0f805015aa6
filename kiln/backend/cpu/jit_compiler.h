// The CPU JIT's kernel cache: memory (kernel key -> function), then disk
// (entries named by a hash of source, compiler, flags, kiln version and CPU),
// then the system compiler ($CXX, else g++, c++, clang++) started with an
// argv, never a shell. Concurrent first uses of one key build it once.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "kiln/backend/cpu/jit_source.h"

namespace kiln::detail {

/** The kernel for spec, built on first use. nullptr when no compiler is
 *  available or the build failed (a warning on stderr says why, once); the
 *  caller then runs the region's ops unfused. */
JitKernel jit_kernel(const JitKernelSpec& spec);

struct JitStats {
  size_t compiles = 0;   // compiler runs that produced a kernel
  size_t disk_loads = 0; // kernels loaded from the disk cache
  size_t failures = 0;   // builds that failed (no compiler, compile error)
};
JitStats jit_stats();

/** Forgets the kernels in memory and the probed compiler and cache
 *  directory, so the next kernel re-reads CXX, KILN_CACHE_DIR, ... (tests
 *  and benchmarks). Loaded libraries stay mapped. */
void jit_reset();

/** The directory kernels are cached in (a private temporary one when the
 *  configured one is refused; "" when there is none). */
std::string jit_cache_dir();

/** Test hook: rewrites each generated source before it is hashed and built
 *  (an empty function removes the hook). Forgets the kernels in memory. */
void jit_set_source_filter(std::function<std::string(const std::string&)> f);

/** KILN_COMPILE_CHECK=1: each fused region also runs unfused and a result
 *  that differs raises std::runtime_error. Tests switch it here. */
void set_compile_check(bool on);

} // namespace kiln::detail
