// eval_gpu of the primitives that have no GPU kernel yet: each runs its
// eval_cpu through eval_on_cpu. Keep README.md's list in step with this file.
#include "kiln/backend/cuda/fallback.h"

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>

#include "kiln/primitives/creation.h"
#include "kiln/primitives/custom.h"
#include "kiln/primitives/elementwise.h"
#include "kiln/primitives/indexing.h"
#include "kiln/primitives/linalg.h"
#include "kiln/primitives/reduction.h"
#include "kiln/primitives/shape.h"
#include "kiln/primitives/slicing.h"
#include "kiln/primitives/sort.h"

namespace kiln::cuda {

namespace {

void log_fallback(const Primitive& p) {
  static const int level = [] {
    const char* v = std::getenv("KILN_DEBUG");
    return v ? std::atoi(v) : 0;
  }();
  if (level < 1) return;
  static std::mutex m;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(m);
  // Once per primitive at level 1; every time from level 3 (each eval).
  if (seen.insert(p.name()).second || level >= 3) {
    std::cerr << "[kiln gpu] " << p.name()
              << " runs on the CPU (no GPU kernel yet)\n";
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

namespace kiln {

#define KILN_GPU_FALLBACK(Name)                                       \
  void Name::eval_gpu(const std::vector<array>& in,                   \
                      std::vector<array>& out) {                      \
    cuda::eval_on_cpu(*this, in, out);                                \
  }

KILN_GPU_FALLBACK(Eig)

#undef KILN_GPU_FALLBACK

} // namespace kiln
