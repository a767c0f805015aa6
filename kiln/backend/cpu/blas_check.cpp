// OpenBLAS picks its kernels by recognising the CPU at load time. A release
// older than the CPU falls back to generic SSE3 kernels ("Prescott"): on a
// Sapphire Rapids machine with Debian 12's OpenBLAS 0.3.21 that makes a
// 1024^3 sgemm 4.7x slower (32 ms against 6.9 ms with OPENBLAS_CORETYPE set).
// Say so once, with the fix, instead of being silently slow.
#include "kiln/backend/cpu/blas.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "kiln/backend/cpu/gemm.h"

namespace kiln::detail {

void check_blas_core_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("OPENBLAS_CORETYPE")) return;
    const char* name = openblas_get_corename();
    std::string core = name ? name : "";
    bool generic = core == "Prescott" || core == "Core2" || core == "Penryn" ||
                   core == "Dunnington" || core == "Nehalem" || core == "Atom";
    const char* hint =
        __builtin_cpu_supports("avx512f")
            ? "SkylakeX"
            : (__builtin_cpu_supports("avx2") ? "Haswell" : nullptr);
    if (generic && hint) {
      std::fprintf(stderr,
                   "kiln: OpenBLAS does not recognise this CPU and runs its "
                   "generic '%s' kernels (GEMM several times slower). Set "
                   "OPENBLAS_CORETYPE=%s in the environment before starting "
                   "the program.\n",
                   core.c_str(), hint);
    }
  });
}

} // namespace kiln::detail
