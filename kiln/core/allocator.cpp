#include "kiln/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace kiln {

namespace {

// Each allocation carries a 64-byte header holding its size, which keeps the
// user pointer 64-byte aligned and lets free() account without a map.
constexpr size_t header = 64;

std::atomic<size_t> active{0};
std::atomic<size_t> peak{0};
std::atomic<size_t> memory_limit{0};
std::atomic<size_t> cache_limit{0};

void update_peak(size_t now) {
  size_t p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}

} // namespace

namespace allocator {

Buffer malloc(size_t nbytes) {
  size_t limit = memory_limit.load();
  if (limit > 0 && active.load() + nbytes > limit) {
    throw std::runtime_error(
        "[malloc] allocating " + std::to_string(nbytes) +
        " bytes would pass the memory limit of " + std::to_string(limit) +
        " bytes.");
  }
  size_t total = (header + nbytes + 63) / 64 * 64;
  void* raw = std::aligned_alloc(64, total);
  if (raw == nullptr) {
    throw std::runtime_error(
        "[malloc] out of memory allocating " + std::to_string(nbytes) +
        " bytes.");
  }
  *static_cast<size_t*>(raw) = nbytes;
  update_peak(active.fetch_add(nbytes) + nbytes);
  return Buffer{static_cast<char*>(raw) + header};
}

size_t size_of(Buffer b) {
  return *reinterpret_cast<size_t*>(static_cast<char*>(b.ptr) - header);
}

void free(Buffer b) {
  if (b.ptr == nullptr) return;
  active.fetch_sub(size_of(b));
  std::free(static_cast<char*>(b.ptr) - header);
}

} // namespace allocator

size_t get_active_memory() { return active.load(); }
size_t get_peak_memory() { return peak.load(); }
void reset_peak_memory() { peak.store(active.load()); }
// The host allocator keeps no cache: freed buffers go straight back to libc,
// whose own arenas already recycle them cheaply.
size_t get_cache_memory() { return 0; }
size_t set_memory_limit(size_t limit) { return memory_limit.exchange(limit); }
size_t get_memory_limit() { return memory_limit.load(); }
size_t set_cache_limit(size_t limit) { return cache_limit.exchange(limit); }
void clear_cache() {}

} // namespace kiln
