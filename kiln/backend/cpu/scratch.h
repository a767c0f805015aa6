// Scratch memory from kiln's allocator, whose cache keeps freed blocks for
// the next call: glibc maps a large allocation afresh each time and unmaps
// it on free, and faulting its pages in again costs more than the work of
// many kernels (a convolution's small GEMMs, a radix sort's passes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "kiln/core/allocator.h"

namespace kiln::detail {

/** A temporary array of G. */
template <typename G>
class Temp {
 public:
  Temp() = default;
  explicit Temp(size_t n) { allocate(n); }
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
  ~Temp() {
    if (buf_.ptr) allocator::free(buf_);
  }
  G* allocate(size_t n) {
    buf_ = allocator::malloc(std::max<size_t>(n, 1) * sizeof(G));
    return get();
  }
  G* get() const { return static_cast<G*>(buf_.ptr); }

 private:
  allocator::Buffer buf_;
};

/** std::vector's allocator over kiln's. */
template <typename T>
struct CachedAllocator {
  using value_type = T;
  CachedAllocator() = default;
  template <typename U>
  CachedAllocator(const CachedAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(allocator::malloc(n * sizeof(T)).ptr);
  }
  void deallocate(T* p, size_t) { allocator::free(allocator::Buffer{p}); }
  /** resize() leaves new elements default-initialized (no zero fill):
   *  scratch is written before it is read, and zeroing the 16 MiB key
   *  buffers of a 4M-element sort cost 7% of it. */
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const CachedAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CachedAllocator<U>&) const {
    return false;
  }
};

template <typename T>
using scratch_vector = std::vector<T, CachedAllocator<T>>;

} // namespace kiln::detail
