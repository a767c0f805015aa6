// The device side of a buffer (array.h declares it; the CUDA backend owns
// it): its device memory or uploaded copy, its host copy once read, the
// stream that wrote it and the streams that used it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

namespace kiln::detail {

struct DeviceRecord {
  std::mutex mutex;
  void* device = nullptr; // the buffer (on_device) or its uploaded copy
  size_t device_bytes = 0;
  void* host = nullptr;   // host copy of a device buffer, once read
  int producer = -1;      // stream that wrote the device memory
  std::atomic<uint64_t> used{0};
  // Memory of another framework (interop.h): given back through this, not
  // to kiln's allocator.
  std::function<void()> external_release;
};

} // namespace kiln::detail
