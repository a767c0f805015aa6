// Memory statistics and limits.
#include "kiln_py.h"

namespace kiln::py {

void init_memory(nb::module_& m) {
  m.def("get_active_memory", &get_active_memory, "Bytes held by arrays now.");
  m.def("get_peak_memory", &get_peak_memory,
        "The most bytes held at once since the last reset.");
  m.def("reset_peak_memory", &reset_peak_memory, "Reset the peak count.");
  m.def("get_cache_memory", &get_cache_memory,
        "Bytes kept in the buffer cache for reuse.");
  m.def("set_memory_limit", &set_memory_limit, "limit"_a,
        "Set the memory limit in bytes; returns the previous one.");
  m.def("get_memory_limit", &get_memory_limit, "The memory limit in bytes.");
  m.def("set_cache_limit", &set_cache_limit, "limit"_a,
        "Set the cache limit in bytes; returns the previous one.");
  m.def("clear_cache", &clear_cache, "Free the buffer cache.");
}

} // namespace kiln::py
