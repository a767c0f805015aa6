// The device headers under kiln/backend/cuda/device/, embedded at build time
// (embed_device.cmake) so NVRTC compiles the same text nvcc includes.
#pragma once

#include <vector>

namespace kiln::cuda {

struct DeviceSource {
  const char* include_name; // e.g. "kiln/backend/cuda/device/unary_ops.cuh"
  const char* text;
};

const std::vector<DeviceSource>& device_sources();

} // namespace kiln::cuda
