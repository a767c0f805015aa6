#include "kiln/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>
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

// Buffers are recycled instead of returned to libc. Large ones because
// glibc maps big blocks with mmap and unmaps them on free, so every new
// large array would pay a page fault per 4 KiB on first touch; small ones
// because an aligned malloc from 1 KiB up consolidates glibc's fast bins
// first, a third of the time of evaluating a small op. Free lists are keyed
// by the allocation size: in 64-byte steps below 64 KiB (an array of lists
// indexed by the step), page-rounded above.
constexpr size_t cache_min_bytes = 64 << 10;
constexpr size_t small_classes = cache_min_bytes / 64;

size_t default_cache_limit() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return size_t(1) << 30;
  return static_cast<size_t>(pages) * static_cast<size_t>(page) / 4;
}

std::atomic<size_t> cache_limit{default_cache_limit()};

struct BufferCache {
  std::mutex mutex;
  std::vector<void*> small[small_classes];
  std::unordered_map<size_t, std::vector<void*>> large;
  size_t bytes = 0;

  std::vector<void*>& list(size_t total) {
    return total < cache_min_bytes ? small[total / 64] : large[total];
  }

  void* take(size_t total) {
    std::lock_guard<std::mutex> lock(mutex);
    auto& l = list(total);
    if (l.empty()) return nullptr;
    void* p = l.back();
    l.pop_back();
    bytes -= total;
    return p;
  }

  bool put(void* raw, size_t total) {
    std::lock_guard<std::mutex> lock(mutex);
    if (bytes + total > cache_limit.load()) return false;
    list(total).push_back(raw);
    bytes += total;
    return true;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& l : small) {
      for (void* p : l) std::free(p);
      l = {};
    }
    for (auto& [size, l] : large) {
      for (void* p : l) std::free(p);
    }
    large.clear();
    bytes = 0;
  }
};

BufferCache& cache() {
  static BufferCache* c = new BufferCache; // outlives static destructors
  return *c;
}

// Buffers from 4 MiB are aligned to, and asked to live in, 2 MiB pages
// (as NumPy's are): streaming through them then costs 512x fewer TLB
// misses; MPI's 16 MB all-reduce into a 4 KiB-paged buffer takes 1.35x
// the time.
constexpr size_t huge_min_bytes = 4 << 20;
constexpr size_t huge_page = 2 << 20;

size_t total_size(size_t nbytes) {
  size_t total = (header + nbytes + 63) / 64 * 64;
  if (total >= huge_min_bytes) {
    return (total + huge_page - 1) / huge_page * huge_page;
  }
  if (total >= cache_min_bytes) total = (total + 4095) / 4096 * 4096;
  return total;
}

void* allocate(size_t total) {
  if (total < huge_min_bytes) return std::aligned_alloc(64, total);
  void* raw = std::aligned_alloc(huge_page, total);
#ifdef MADV_HUGEPAGE
  if (raw) madvise(raw, total, MADV_HUGEPAGE); // a hint; failure is harmless
#endif
  return raw;
}

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
  size_t total = total_size(nbytes);
  void* raw = cache().take(total);
  if (raw == nullptr) raw = allocate(total);
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
  size_t nbytes = size_of(b);
  active.fetch_sub(nbytes);
  void* raw = static_cast<char*>(b.ptr) - header;
  size_t total = total_size(nbytes);
  if (!cache().put(raw, total)) std::free(raw);
}

} // namespace allocator

size_t get_active_memory() { return active.load(); }
size_t get_peak_memory() { return peak.load(); }
// To 0, as MLX resets it (the peak then follows new allocations).
void reset_peak_memory() { peak.store(0); }
size_t get_cache_memory() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().bytes;
}
size_t set_memory_limit(size_t limit) { return memory_limit.exchange(limit); }
size_t get_memory_limit() { return memory_limit.load(); }
size_t set_cache_limit(size_t limit) {
  size_t old = cache_limit.exchange(limit);
  if (limit < get_cache_memory()) clear_cache();
  return old;
}
void clear_cache() { cache().clear(); }

} // namespace kiln
