// A small pool that splits large loops across the machine's cores. The caller
// runs one chunk itself; nested calls from inside a chunk run inline.
#pragma once

#include <cstddef>
#include <functional>

namespace kiln::detail {

/** Number of threads used for a parallel loop (KILN_NUM_THREADS, else the
 *  hardware concurrency). */
int num_threads();

/** Run fn(begin, end) over [0, n) in up to num_threads() chunks of at least
 *  `grain` iterations each. Returns after every chunk has finished. */
void parallel_for(size_t n, size_t grain,
                  const std::function<void(size_t, size_t)>& fn);

} // namespace kiln::detail
