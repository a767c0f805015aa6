// KILN_HOST_PROFILE=1: where the host's time goes. Each primitive's eval
// (for GPU work: the time to queue its kernels), compile's replay and the
// whole of each eval are timed and summed by name; the table goes to stderr
// at exit. Off (one relaxed load per node) unless the variable is set.
//
// KILN_GPU_PROFILE=1: where the GPU's time goes, by primitive and operand
// layout. Events recorded on the stream around each primitive's GPU work
// are read back after eval's wait and summed under a label such as
// "Copy bf16[32,256,8,64]s -> bf16[32,256,8,64]c" (c: row-major, f:
// column-major, b: broadcast, s: other strides); a second table at exit.
// An event pair also counts time the GPU waited for the host inside the
// pair, so a label's time is an upper bound when the host falls behind.
#pragma once

#include <chrono>
#include <string>

namespace kiln {
class array;
}

namespace kiln::detail {

bool host_profile_enabled();
void host_profile_add(const char* name, double seconds);
/** Forgets what was summed so far (a benchmark calls it after warm-up, so
 *  first-use compiles stay out of the table); both tables. */
void host_profile_reset();

bool gpu_profile_enabled();
void gpu_profile_add(const std::string& label, double seconds);
/** The GPU table's label of node (evaluated): its primitive, its inputs'
 *  and first output's dtypes, shapes and layouts. */
std::string gpu_profile_label(const array& node);

/** Adds the time from construction to destruction under `name` when host
 *  profiling is on; `name` must outlive the program (a literal or a
 *  primitive's name()). */
class HostTimer {
 public:
  explicit HostTimer(const char* name)
      : name_(host_profile_enabled() ? name : nullptr) {
    if (name_) start_ = std::chrono::steady_clock::now();
  }
  ~HostTimer() {
    if (!name_) return;
    std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
    host_profile_add(name_, d.count());
  }
  HostTimer(const HostTimer&) = delete;
  HostTimer& operator=(const HostTimer&) = delete;

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace kiln::detail
