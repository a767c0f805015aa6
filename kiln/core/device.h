// Devices and streams. A build without CUDA, or a machine without a GPU,
// runs everything on the CPU; the default device is the GPU when present.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <variant>

namespace kiln {

struct Device {
  enum class DeviceType { cpu, gpu };
  static constexpr DeviceType cpu = DeviceType::cpu;
  static constexpr DeviceType gpu = DeviceType::gpu;

  DeviceType type;
  int index;

  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  bool operator==(const Device& o) const {
    return type == o.type && index == o.index;
  }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

struct Stream {
  int index;
  Device device;
  Stream(int i, Device d) : index(i), device(d) {}
  bool operator==(const Stream& o) const { return index == o.index; }
  bool operator!=(const Stream& o) const { return !(*this == o); }
};

/** Empty means "the default stream of the default device". */
using StreamOrDevice = std::variant<std::monostate, Stream, Device>;

const Device& default_device();
void set_default_device(const Device& d);
bool is_available(const Device& d);

Stream default_stream(Device d);
void set_default_stream(Stream s);
Stream new_stream(Device d);
Stream to_stream(StreamOrDevice s);
/** Wait for everything queued on a stream (the default stream if empty). */
void synchronize(StreamOrDevice s = {});

std::ostream& operator<<(std::ostream& os, const Device& d);
std::ostream& operator<<(std::ostream& os, const Stream& s);

namespace gpu {
/** True when the library was built with CUDA and a GPU is present. */
bool is_available();

/** GPU memory held by arrays, its peak, and freed memory kept for reuse
 *  (all 0 without a GPU). */
size_t get_active_memory();
size_t get_peak_memory();
void reset_peak_memory();
size_t get_cache_memory();
/** Returns cached GPU memory to the driver. */
void clear_cache();

/** Blocks until the GPU has finished the work queued on a kiln stream (-1:
 *  every stream). Used by synchronize(); a no-op without a GPU. */
void synchronize(int stream_index);

/** KILN_GPU_PROFILE: profile_begin and profile_end bracket one primitive's
 *  GPU work on a kiln stream with timing events; profile_collect, after the
 *  streams are synchronized, adds each bracket's time to the GPU table under
 *  its label. No-ops without a GPU. */
void profile_begin(int stream_index);
void profile_end(int stream_index, std::string label);
void profile_collect();

/** What device_info reports for the GPU. */
struct Properties {
  std::string name;         // e.g. "NVIDIA H200"
  std::string architecture; // the compute capability as NVRTC names it: "sm_90"
  size_t total_memory = 0;  // bytes
  int multiprocessors = 0;
};
/** The GPU's properties; throws std::invalid_argument without a GPU. */
Properties properties();
} // namespace gpu

} // namespace kiln
