#include "kiln/core/gpu_fallback.h"

#include <iostream>
#include <mutex>
#include <set>
#include <stdexcept>

#include "kiln/core/env.h"

namespace kiln::detail {

void gpu_fallback(const std::string& primitive, const std::string& reason) {
  if (env::flag("KILN_GPU_STRICT", false)) {
    throw std::runtime_error("[" + primitive + "] has no GPU kernel for " +
                             reason + " and KILN_GPU_STRICT is set (unset "
                             "it to run this primitive on the CPU).");
  }
  const int level = env::debug_level();
  if (level < 1) return;
  static std::mutex m;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(m);
  // Once per primitive and reason at level 1; every time from level 3.
  if (seen.insert(primitive + "\n" + reason).second || level >= 3) {
    std::cerr << "[kiln gpu] " << primitive << " runs on the CPU: " << reason
              << "\n";
  }
}

} // namespace kiln::detail
