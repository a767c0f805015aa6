#include "kiln/backend/cuda/device.h"

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/launch_queue.h"
#include "kiln/backend/cuda/toolkit_library.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/gpu_libraries.h"
#include "kiln/core/profile.h"

namespace kiln {

namespace gpu {

bool is_available() {
  static const bool available = cuda::device_count() > 0;
  return available;
}

const std::string& missing_libraries() { return cuda::toolkit_missing(); }

Properties properties() {
  if (!is_available()) {
    throw std::invalid_argument("[gpu] no GPU is present.");
  }
  const cuda::DeviceInfo& d = cuda::device_info();
  return {d.name, d.arch(), d.total_memory, d.sm_count};
}

// KILN_GPU_PROFILE's brackets: a pair of timing events per primitive,
// read back once the streams are synchronized. Profiling only: events are
// created and destroyed per bracket.
namespace {

struct ProfileBracket {
  cudaEvent_t start = nullptr, stop = nullptr;
  std::string label;
};

struct ProfileBrackets {
  std::mutex mutex;
  std::vector<ProfileBracket> done;
  std::unordered_map<int, cudaEvent_t> open; // by stream index
};

ProfileBrackets& brackets() {
  static ProfileBrackets* b =
      new ProfileBrackets; // outlives static destructors
  return *b;
}

cudaEvent_t record_timing_event(int stream_index) {
  cuda::set_current_device();
  cudaEvent_t e;
  KILN_CHECK_CUDA(cudaEventCreate(&e));
  KILN_CHECK_CUDA(cudaEventRecord(e, cuda::cuda_stream(stream_index)));
  return e;
}

} // namespace

void profile_begin(int stream_index) {
  cudaEvent_t e = record_timing_event(stream_index);
  auto& b = brackets();
  std::lock_guard<std::mutex> lock(b.mutex);
  std::swap(b.open[stream_index], e);
  if (e) cudaEventDestroy(e); // an unmatched begin (its eval threw)
}

void profile_end(int stream_index, std::string label) {
  cudaEvent_t stop = record_timing_event(stream_index);
  auto& b = brackets();
  std::lock_guard<std::mutex> lock(b.mutex);
  cudaEvent_t start = nullptr;
  std::swap(b.open[stream_index], start);
  if (!start) {
    cudaEventDestroy(stop);
    return;
  }
  b.done.push_back({start, stop, std::move(label)});
}

void profile_collect() {
  std::vector<ProfileBracket> done;
  {
    auto& b = brackets();
    std::lock_guard<std::mutex> lock(b.mutex);
    done.swap(b.done);
  }
  for (auto& br : done) {
    float ms = 0;
    if (cudaEventSynchronize(br.stop) == cudaSuccess &&
        cudaEventElapsedTime(&ms, br.start, br.stop) == cudaSuccess) {
      detail::gpu_profile_add(br.label, ms * 1e-3);
    }
    cudaEventDestroy(br.start);
    cudaEventDestroy(br.stop);
  }
}

} // namespace gpu

namespace cuda {

namespace {

struct Streams {
  std::mutex mutex;
  std::unordered_map<int, cudaStream_t> by_index;
  std::vector<cudaEvent_t> free_events;
};

Streams& streams() {
  static Streams* s = new Streams; // outlives static destructors
  return *s;
}

} // namespace

std::string DeviceInfo::arch() const {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

int device_count() {
  static const int count = [] {
    int n = 0;
    // Missing libraries, no driver or no device: the CPU runs everything.
    if (!toolkit_missing().empty()) return 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0) {
    throw std::invalid_argument(std::string("[gpu] ") + name +
                                " must be a non-negative integer, got '" + v +
                                "'.");
  }
  return static_cast<int>(n);
}

// KILN_DEVICE names the GPU; else a process of a multi-process job takes
// the GPU of its rank on this host (one GPU per process, as NCCL wants).
int chosen_ordinal() {
  int count = device_count();
  int named = env_int("KILN_DEVICE", -1);
  if (named >= 0) {
    if (named >= count) {
      throw std::invalid_argument(
          "[gpu] KILN_DEVICE=" + std::to_string(named) + " but this machine "
          "has " + std::to_string(count) + " GPU(s).");
    }
    return named;
  }
  int local = env_int("KILN_LOCAL_RANK",
                      env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0));
  return count > 0 ? local % count : 0;
}

} // namespace

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    d.ordinal = chosen_ordinal();
    KILN_CHECK_CUDA(cudaSetDevice(d.ordinal));
    cudaDeviceProp p;
    KILN_CHECK_CUDA(cudaGetDeviceProperties(&p, d.ordinal));
    d.sm_count = p.multiProcessorCount;
    d.major = p.major;
    d.minor = p.minor;
    d.total_memory = p.totalGlobalMem;
    d.shared_per_block_optin = p.sharedMemPerBlockOptin;
    d.name = p.name;
    return d;
  }();
  return info;
}

void set_current_device() {
  thread_local bool done = false;
  if (!done) {
    KILN_CHECK_CUDA(cudaSetDevice(device_info().ordinal));
    done = true;
  }
}

cudaStream_t cuda_stream(int index) {
  flush_launches(index);
  return raw_stream(index);
}

cudaStream_t raw_stream(int index) {
  auto& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.by_index.find(index);
  if (it != s.by_index.end()) return it->second;
  set_current_device();
  cudaStream_t st;
  KILN_CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  s.by_index.emplace(index, st);
  return st;
}

cudaStream_t cuda_stream(const Stream& s) { return cuda_stream(s.index); }

cudaEvent_t acquire_event() {
  auto& s = streams();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.free_events.empty()) {
      cudaEvent_t e = s.free_events.back();
      s.free_events.pop_back();
      return e;
    }
  }
  set_current_device();
  cudaEvent_t e;
  KILN_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void release_event(cudaEvent_t e) {
  auto& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.free_events.push_back(e);
}

void stream_wait(int consumer, int producer) {
  if (consumer == producer) return;
  cudaEvent_t e = acquire_event();
  KILN_CHECK_CUDA(cudaEventRecord(e, cuda_stream(producer)));
  KILN_CHECK_CUDA(cudaStreamWaitEvent(cuda_stream(consumer), e, 0));
  // Reuse after this is safe: a wait binds to the record made before it.
  release_event(e);
}

void synchronize_stream(int index) {
  KILN_CHECK_CUDA(cudaStreamSynchronize(cuda_stream(index)));
}

void synchronize_all() {
  flush_all_launches();
  std::vector<cudaStream_t> all;
  {
    auto& s = streams();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& [i, st] : s.by_index) all.push_back(st);
  }
  for (auto st : all) KILN_CHECK_CUDA(cudaStreamSynchronize(st));
}

} // namespace cuda
} // namespace kiln
