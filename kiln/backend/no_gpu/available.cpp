// The CPU-only build: no GPU is ever available, so every primitive runs its
// eval_cpu and Primitive::eval_gpu's default (which throws) is unreachable.
#include "kiln/core/array.h"
#include "kiln/core/device.h"
#include "kiln/core/gpu_libraries.h"
#include "kiln/distributed/communicator.h"

#include <stdexcept>

namespace kiln::gpu {

bool is_available() { return false; }

const std::string& missing_libraries() {
  static const std::string none;
  return none;
}

size_t get_active_memory() { return 0; }
size_t get_peak_memory() { return 0; }
void reset_peak_memory() {}
size_t get_cache_memory() { return 0; }
void clear_cache() {}
void synchronize(int) {}
void profile_begin(int) {}
void profile_end(int, std::string) {}
void profile_collect() {}

Properties properties() {
  throw std::invalid_argument("[gpu] no GPU in this build.");
}

} // namespace kiln::gpu

namespace kiln::detail {

// No buffer ever gets a device record in this build.
void release_device_record(DeviceRecord*) {}

} // namespace kiln::detail

namespace kiln::distributed::detail {


std::shared_ptr<Communicator> nccl_communicator(std::string& why) {
  why = "kiln was built without the CUDA backend";
  return nullptr;
}
bool nccl_library_loads() { return false; }

} // namespace kiln::distributed::detail
