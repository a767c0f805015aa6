// Device memory: a caching allocator over cudaMalloc (never managed memory).
// Freed blocks are kept by rounded size and handed out again; a block freed
// after use on one stream is reused on another only behind an event, so a
// kernel still reading it can never see it overwritten.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

/** Device memory of at least nbytes for use on kiln stream `stream`.
 *  Throws std::runtime_error naming the size when the device is out of
 *  memory even after the cache is emptied. nbytes 0 gives nullptr. */
void* device_malloc(size_t nbytes, int stream);

/** Returns a block to the cache. used_streams is a bit mask of the kiln
 *  streams (index % 64) that may still be working on it. */
void device_free(void* ptr, uint64_t used_streams);

/** Bytes asked for when ptr was allocated. */
size_t device_size(void* ptr);

} // namespace kiln::cuda
