#include "kiln/core/device.h"
#include "kiln/core/gpu_libraries.h"

#include <iostream>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "kiln/transforms/eval.h"

namespace kiln {

namespace {

struct StreamRegistry {
  std::mutex mutex;
  std::vector<Stream> streams;
  Stream default_cpu{0, Device::cpu};
  Stream default_gpu{-1, Device::gpu};
  StreamRegistry() {
    streams.push_back(default_cpu);
    if (gpu::is_available()) {
      default_gpu = Stream(1, Device::gpu);
      streams.push_back(default_gpu);
    }
  }
};

StreamRegistry& registry() {
  static StreamRegistry r;
  return r;
}

Device& mutable_default_device() {
  static Device d = gpu::is_available() ? Device(Device::gpu) : Device::cpu;
  return d;
}

// A GPU build whose CUDA libraries are missing runs what asks for the GPU
// on the CPU, saying why once; a CPU-only build refuses, as MLX's does.
bool gpu_falls_back_to_cpu(const Device& d) {
  if (d.type != Device::gpu || gpu::missing_libraries().empty()) return false;
  static std::once_flag said;
  std::call_once(said, [] {
    std::cerr << "[kiln] the GPU was asked for and runs on the CPU: "
              << gpu::missing_libraries() << ".\n";
  });
  return true;
}

} // namespace

bool is_available(const Device& d) {
  return d.type == Device::cpu || gpu::is_available();
}

const Device& default_device() { return mutable_default_device(); }

void set_default_device(const Device& d) {
  if (gpu_falls_back_to_cpu(d)) return;
  if (!is_available(d)) {
    throw std::invalid_argument(
        "[set_default_device] the GPU is not available (CPU-only build or no "
        "GPU present).");
  }
  mutable_default_device() = d;
}

Stream default_stream(Device d) {
  if (gpu_falls_back_to_cpu(d)) d = Device::cpu;
  if (!is_available(d)) {
    throw std::invalid_argument("[default_stream] the GPU is not available.");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return d.type == Device::cpu ? r.default_cpu : r.default_gpu;
}

void set_default_stream(Stream s) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  (s.device.type == Device::cpu ? r.default_cpu : r.default_gpu) = s;
}

Stream new_stream(Device d) {
  if (gpu_falls_back_to_cpu(d)) d = Device::cpu;
  if (!is_available(d)) {
    throw std::invalid_argument("[new_stream] the GPU is not available.");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Stream s(static_cast<int>(r.streams.size()), d);
  r.streams.push_back(s);
  return s;
}

Stream to_stream(StreamOrDevice s) {
  if (auto* st = std::get_if<Stream>(&s)) return *st;
  if (auto* d = std::get_if<Device>(&s)) return default_stream(*d);
  return default_stream(default_device());
}

void synchronize(StreamOrDevice s) {
  detail::wait_for_async_evals();
  if (!gpu::is_available()) return;
  if (auto* st = std::get_if<Stream>(&s)) {
    if (st->device == Device::gpu) gpu::synchronize(st->index);
  } else {
    gpu::synchronize(-1);
  }
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << "Device(" << (d.type == Device::cpu ? "cpu" : "gpu") << ", "
            << d.index << ")";
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", " << s.index << ")";
}

} // namespace kiln
