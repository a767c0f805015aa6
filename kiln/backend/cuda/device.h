// The GPU as the backend sees it: discovery, the CUDA stream behind each
// kiln stream, and ordering between streams and with the host.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kiln/core/device.h"

namespace kiln::cuda {

struct DeviceInfo {
  int ordinal = 0;
  int sm_count = 0;
  int major = 0, minor = 0;
  size_t total_memory = 0;
  /** The most shared memory a block may have once it opts in. */
  size_t shared_per_block_optin = 0;
  std::string name;
  /** NVRTC's target for this device's own machine code, e.g. "sm_90". */
  std::string arch() const;
};

/** Number of CUDA devices (0 when there is no driver or no GPU). */
int device_count();
/** Facts about the process's GPU (kiln uses one: KILN_DEVICE, else the
 *  process's local rank in a multi-process job, else 0); makes it
 *  current. */
const DeviceInfo& device_info();
/** Makes that GPU current on the calling thread (cheap when it is). */
void set_current_device();

/** The non-blocking CUDA stream behind a kiln GPU stream (created at first
 *  use; never the legacy default stream), with the kernels recorded for it
 *  (launch_queue.h) sent first: work the caller queues there comes after
 *  them. */
cudaStream_t cuda_stream(const Stream& s);
/** cuda_stream() by kiln stream index. */
cudaStream_t cuda_stream(int index);
/** The CUDA stream without sending the recorded kernels: for the launch
 *  queue itself. */
cudaStream_t raw_stream(int index);

/** Makes `consumer` wait for everything queued so far on `producer`. */
void stream_wait(int consumer, int producer);
/** Blocks the host until everything queued on stream `index` is done. */
void synchronize_stream(int index);
/** Blocks the host until every kiln GPU stream is done. */
void synchronize_all();

/** Event pool: events without timing, reused after release. */
cudaEvent_t acquire_event();
void release_event(cudaEvent_t e);

} // namespace kiln::cuda
