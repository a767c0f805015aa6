// eval_on_cpu: a primitive whose inputs the GPU kernels cannot take (a
// dtype, a layout, a size; README.md lists them) runs its eval_cpu on host
// views. Every primitive has an eval_gpu of its own.
#include "kiln/backend/cuda/fallback.h"

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>

#include "kiln/core/env.h"
#include "kiln/core/primitive.h"

namespace kiln::cuda {

namespace {

void log_fallback(const Primitive& p) {
  const int level = env::debug_level();
  if (level < 1) return;
  static std::mutex m;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(m);
  // Once per primitive at level 1; every time from level 3 (each eval).
  if (seen.insert(p.name()).second || level >= 3) {
    std::cerr << "[kiln gpu] " << p.name()
              << " runs on the CPU (its inputs have no GPU kernel)\n";
  }
}

} // namespace

void eval_on_cpu(Primitive& p, const std::vector<array>& inputs,
                 std::vector<array>& outputs) {
  log_fallback(p);
  p.eval_cpu(inputs, outputs);
}

void eval_on_cpu(UnaryPrimitive& p, const std::vector<array>& inputs,
                 array& out) {
  log_fallback(p);
  p.eval_cpu(inputs, out);
}

} // namespace kiln::cuda
