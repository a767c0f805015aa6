// KILN_HOST_PROFILE=1: where the host's time goes. Each primitive's eval
// (for GPU work: the time to queue its kernels), compile's replay and the
// whole of each eval are timed and summed by name; the table goes to stderr
// at exit. Off (one relaxed load per node) unless the variable is set.
#pragma once

#include <chrono>

namespace kiln::detail {

bool host_profile_enabled();
void host_profile_add(const char* name, double seconds);
/** Forgets what was summed so far (a benchmark calls it after warm-up, so
 *  first-use compiles stay out of the table). */
void host_profile_reset();

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
