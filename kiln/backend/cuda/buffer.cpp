#include "kiln/backend/cuda/buffer.h"

#include <functional>
#include <mutex>
#include <vector>

#include "kiln/backend/cuda/allocator.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/device_record.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/layout.h"

namespace kiln {

namespace detail {

void release_device_record(DeviceRecord* r) {
  if (r->external_release) {
    // The owner may reuse the memory at once: kiln's streams finish first.
    uint64_t used = r->used.load();
    for (int s = 0; used != 0; ++s, used >>= 1) {
      if (used & 1) cudaStreamSynchronize(cuda::raw_stream(s));
    }
    r->external_release();
  } else {
    cuda::device_free(r->device, r->used.load());
  }
  if (r->host) allocator::free(allocator::Buffer{r->host});
  delete r;
}

void* host_view(const array& a) {
  DeviceRecord* r = a.device_record();
  std::lock_guard<std::mutex> lock(r->mutex);
  if (r->host == nullptr && r->device_bytes > 0) {
    // Same stream as the producer: the copy runs after it, then we wait.
    int s = r->producer >= 0 ? r->producer : 0;
    cudaStream_t st = cuda::cuda_stream(s);
    void* host = allocator::malloc(r->device_bytes).ptr;
    cudaError_t e = cudaMemcpyAsync(host, r->device, r->device_bytes,
                                    cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) {
      allocator::free(allocator::Buffer{host});
      cuda::throw_cuda_error("copying a GPU array to the host", e);
    }
    r->host = host;
  }
  return static_cast<char*>(r->host) + a.offset();
}

} // namespace detail

namespace cuda {

uint64_t stream_bit(const Stream& s) { return uint64_t(1) << (s.index % 64); }

namespace {

// Bytes from the buffer's start through the last element a reaches.
size_t reach_bytes(const array& a) {
  if (a.size() == 0) return 0;
  int64_t last = 0;
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (a.strides()[d] > 0) last += (a.shape()[d] - 1) * a.strides()[d];
  }
  return static_cast<size_t>(a.offset()) +
         static_cast<size_t>(last + 1) * a.itemsize();
}

void* upload(const array& a, const Stream& s) {
  auto* r = a.device_record();
  if (r == nullptr) {
    r = a.attach_device_record(new detail::DeviceRecord);
  }
  // Another thread may have attached first; attach returns the live one.
  std::lock_guard<std::mutex> lock(r->mutex);
  size_t need = reach_bytes(a);
  if (need > r->device_bytes) {
    // A view reaching further than the copy so far: upload a larger one.
    // The old copy goes back behind its users, like any freed block.
    void* dev = device_malloc(need, s.index);
    const char* host =
        static_cast<const char*>(a.raw_data_ptr()) - a.offset();
    KILN_CHECK_CUDA(cudaMemcpyAsync(dev, host, need, cudaMemcpyHostToDevice,
                                    cuda_stream(s)));
    device_free(r->device, r->used.load());
    r->device = dev;
    r->device_bytes = need;
    r->producer = s.index;
    r->used = stream_bit(s);
  } else if (r->producer >= 0) {
    stream_wait(s.index, r->producer);
  }
  r->used |= stream_bit(s);
  return static_cast<char*>(r->device) + a.offset();
}

} // namespace

void* device_ptr(const array& a, const Stream& s) {
  if (!a.on_device()) return upload(a, s);
  auto* r = a.device_record();
  if (r->producer >= 0 && r->producer != s.index) {
    stream_wait(s.index, r->producer);
  }
  r->used |= stream_bit(s);
  return a.raw_data_ptr();
}

void set_device_output(array& out, size_t data_size, Strides strides,
                       array::Flags flags, const Stream& s) {
  size_t nbytes = data_size * out.itemsize();
  auto* r = new detail::DeviceRecord;
  try {
    r->device = device_malloc(nbytes, s.index);
  } catch (...) {
    delete r;
    throw;
  }
  r->device_bytes = nbytes;
  r->producer = s.index;
  r->used = stream_bit(s);
  out.set_device_data(r, r->device, data_size, std::move(strides), flags);
}

void set_device_output(array& out, const Stream& s) {
  set_device_output(out, out.size(), row_major_strides(out.shape()),
                    row_major_flags(out.shape()), s);
}

bool donate_device_buffer(const array& in, array& out, const Stream& s) {
  if (!in.is_device_donatable() || in.itemsize() != out.itemsize()) {
    return false;
  }
  auto* r = in.device_record();
  {
    std::lock_guard<std::mutex> lock(r->mutex);
    if (r->host != nullptr || (r->used.load() & ~stream_bit(s)) != 0) {
      return false;
    }
  }
  out.copy_shared_buffer(in);
  return true;
}

} // namespace cuda

namespace gpu {

void synchronize(int stream_index) {
  if (stream_index < 0) {
    cuda::synchronize_all();
  } else {
    cuda::synchronize_stream(stream_index);
  }
}

} // namespace gpu

} // namespace kiln
