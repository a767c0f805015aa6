#include "kiln/backend/cuda/allocator.h"

#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/launch_queue.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/profile.h"

namespace kiln {

namespace cuda {

namespace {

struct Block {
  void* ptr;
  size_t rounded;
  size_t nbytes;
  int stream = -1;                 // the one stream that used it last
  cudaEvent_t ready = nullptr;     // recorded there when it was freed
};

// Small sizes round to a power of two, large ones to 16 KiB steps, so a
// freed block fits the next request of about its size (as MLX does).
size_t round_size(size_t n) {
  if (n <= 256) return 256;
  if (n < (16 << 10)) {
    size_t p = 512;
    while (p < n) p <<= 1;
    return p;
  }
  return (n + (16 << 10) - 1) / (16 << 10) * (16 << 10);
}

class DeviceAllocator {
 public:
  void* malloc(size_t nbytes, int stream) {
    if (nbytes == 0) return nullptr;
    size_t rounded = round_size(nbytes);
    Block b{nullptr, rounded, nbytes};
    if (take_cached(rounded, b)) {
      if (b.ready != nullptr) {
        // Last used on several streams, joined behind this event.
        if (b.stream != stream) {
          KILN_CHECK_CUDA(cudaStreamWaitEvent(cuda_stream(stream), b.ready));
        }
        release_event(b.ready);
        b.ready = nullptr;
      } else if (b.stream >= 0 && b.stream != stream) {
        // Last used on one other stream: everything queued there now
        // includes that use.
        stream_wait(stream, b.stream);
      }
    } else {
      b.ptr = fresh(rounded, nbytes);
    }
    b.nbytes = nbytes;
    std::lock_guard<std::mutex> lock(mutex_);
    live_[b.ptr] = b;
    active_ += nbytes;
    if (active_ > peak_) peak_ = active_;
    return b.ptr;
  }

  void free(void* ptr, uint64_t used) {
    if (ptr == nullptr) return;
    Block b;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(ptr);
      if (it == live_.end()) return;
      b = it->second;
      live_.erase(it);
      active_ -= b.nbytes;
    }
    b.stream = -1;
    b.ready = nullptr;
    if (used != 0 && (used & (used - 1)) == 0) {
      // One stream used it: reuse there is ordered by the stream itself,
      // and a reuse elsewhere waits on it then (malloc). No CUDA call, so
      // freeing costs no driver time in the common case.
      b.stream = __builtin_ctzll(used);
    } else if (used != 0) {
      // Arrays that outlive the CUDA runtime (freed while the process
      // exits) are dropped with it: free runs in destructors and must not
      // throw.
      try {
        // The lowest stream that used it carries the event; any other
        // stream that used it first joins that one, so one event covers
        // them all.
        int first = __builtin_ctzll(used);
        for (int s = first + 1; s < 64; ++s) {
          if (used & (uint64_t(1) << s)) stream_wait(first, s);
        }
        b.stream = first;
        b.ready = acquire_event();
        KILN_CHECK_CUDA(cudaEventRecord(b.ready, cuda_stream(first)));
      } catch (const std::exception&) {
        if (cudaGetLastError() == cudaErrorCudartUnloading ||
            cudaDeviceSynchronize() == cudaErrorCudartUnloading) {
          return;
        }
        // No event: wait until the block is idle, then cache it plain.
        try {
          flush_all_launches();
        } catch (const std::exception&) {
        }
        cudaDeviceSynchronize();
        b.stream = -1;
        b.ready = nullptr;
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    cache_[b.rounded].push_back(b);
    cached_ += b.rounded;
  }

  size_t size(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    return it == live_.end() ? 0 : it->second.nbytes;
  }

  void clear_cache() {
    std::vector<Block> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [size, list] : cache_) {
        blocks.insert(blocks.end(), list.begin(), list.end());
      }
      cache_.clear();
      cached_ = 0;
    }
    if (blocks.empty()) return;
    // cudaFree synchronizes the device, so no kernel still uses a block
    // once the kernels recorded for graphs have been sent.
    flush_all_launches();
    for (auto& b : blocks) {
      if (b.ready) release_event(b.ready);
      cudaFree(b.ptr);
    }
  }

  size_t active() {
    std::lock_guard<std::mutex> lock(mutex_);
    return active_;
  }
  size_t peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  // To zero, as MLX's and the host allocator's: the next allocation sets
  // it again.
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = 0;
  }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  bool take_cached(size_t rounded, Block& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(rounded);
    if (it == cache_.end() || it->second.empty()) return false;
    out = it->second.back();
    it->second.pop_back();
    cached_ -= rounded;
    return true;
  }

  void* fresh(size_t rounded, size_t nbytes) {
    set_current_device();
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, rounded);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError(); // not sticky: clear it and try once more
      clear_cache();
      e = cudaMalloc(&p, rounded);
    }
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw std::runtime_error(
          "[gpu malloc] out of GPU memory allocating " +
          std::to_string(nbytes) + " bytes (" + std::to_string(active()) +
          " bytes in use by arrays).");
    }
    KILN_CHECK_CUDA(e);
    return p;
  }

  std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::unordered_map<size_t, std::vector<Block>> cache_;
  size_t active_ = 0, peak_ = 0, cached_ = 0;
};

DeviceAllocator& allocator() {
  static DeviceAllocator* a = new DeviceAllocator; // outlives destructors
  return *a;
}

} // namespace

void* device_malloc(size_t nbytes, int stream) {
  kiln::detail::HostTimer timer("cuda: allocate");
  return allocator().malloc(nbytes, stream);
}

void device_free(void* ptr, uint64_t used_streams) {
  kiln::detail::HostTimer timer("cuda: free");
  allocator().free(ptr, used_streams);
}

size_t device_size(void* ptr) { return allocator().size(ptr); }

} // namespace cuda

namespace gpu {

size_t get_active_memory() { return cuda::allocator().active(); }
size_t get_peak_memory() { return cuda::allocator().peak(); }
void reset_peak_memory() { cuda::allocator().reset_peak(); }
size_t get_cache_memory() { return cuda::allocator().cached(); }
void clear_cache() { cuda::allocator().clear_cache(); }

} // namespace gpu

} // namespace kiln
