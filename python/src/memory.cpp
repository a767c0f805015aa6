// Memory statistics and limits.
#include "kiln_py.h"

namespace kiln::py {

// Python's figures count host and GPU memory together, so code written for
// one device reads the same on the other (MLX reports its one allocator).
// The peak is the sum of each allocator's peak: an upper bound when both
// are in use.
void init_memory(nb::module_& m) {
  m.def(
      "get_active_memory",
      [] { return get_active_memory() + gpu::get_active_memory(); },
      "Bytes held by arrays now (host and GPU).");
  m.def(
      "get_peak_memory",
      [] { return get_peak_memory() + gpu::get_peak_memory(); },
      "The most bytes held at once since the last reset.");
  m.def(
      "reset_peak_memory",
      [] {
        reset_peak_memory();
        gpu::reset_peak_memory();
      },
      "Reset the peak count.");
  m.def(
      "get_cache_memory",
      [] { return get_cache_memory() + gpu::get_cache_memory(); },
      "Bytes kept in the buffer caches for reuse.");
  m.def("set_memory_limit", &set_memory_limit, "limit"_a,
        "Set the memory limit in bytes; returns the previous one.");
  m.def("get_memory_limit", &get_memory_limit, "The memory limit in bytes.");
  m.def("set_cache_limit", &set_cache_limit, "limit"_a,
        "Set the cache limit in bytes; returns the previous one.");
  m.def(
      "clear_cache",
      [] {
        clear_cache();
        gpu::clear_cache();
      },
      "Free the buffer caches.");
}

} // namespace kiln::py
