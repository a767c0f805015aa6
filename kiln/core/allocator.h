// Host memory for array buffers, with the statistics MLX exposes.
#pragma once

#include <cstddef>

namespace kiln {

namespace allocator {

/** A raw buffer; ptr is 64-byte aligned (room for any SIMD width). */
struct Buffer {
  void* ptr = nullptr;
  void* raw() const { return ptr; }
};

/** Allocates nbytes (0 is allowed); throws std::runtime_error naming the size
 *  when memory is exhausted or the memory limit would be passed. */
Buffer malloc(size_t nbytes);
void free(Buffer b);
/** Size asked for when b was allocated. */
size_t size_of(Buffer b);

} // namespace allocator

size_t get_active_memory();
size_t get_peak_memory();
void reset_peak_memory();
size_t get_cache_memory();
/** Returns the previous limit. 0 means no limit. */
size_t set_memory_limit(size_t limit);
size_t get_memory_limit();
size_t set_cache_limit(size_t limit);
void clear_cache();

} // namespace kiln
