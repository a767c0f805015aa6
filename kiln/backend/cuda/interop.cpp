#include "kiln/backend/cuda/interop.h"

#include <mutex>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/device_record.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/layout.h"

namespace kiln {

namespace cuda {

int device_ordinal() { return device_info().ordinal; }

void export_to_stream(const array& a, cudaStream_t consumer) {
  set_current_device();
  auto* r = a.device_record();
  int producer =
      r && r->producer >= 0 ? r->producer : default_stream(Device::gpu).index;
  if (consumer == nullptr) {
    synchronize_stream(producer);
    return;
  }
  cudaEvent_t e = acquire_event();
  KILN_CHECK_CUDA(cudaEventRecord(e, cuda_stream(producer)));
  KILN_CHECK_CUDA(cudaStreamWaitEvent(consumer, e, 0));
  release_event(e);
}

array adopt_device_memory(void* ptr, size_t span_bytes, Shape shape,
                          Strides strides, Dtype dtype,
                          std::function<void()> release,
                          cudaStream_t producer) {
  set_current_device();
  // Kiln's default GPU stream stands as the memory's producer (readers on
  // other streams wait for it), and it waits for the owner's stream.
  Stream s = default_stream(Device::gpu);
  if (producer != nullptr) {
    cudaEvent_t e = acquire_event();
    KILN_CHECK_CUDA(cudaEventRecord(e, producer));
    KILN_CHECK_CUDA(cudaStreamWaitEvent(cuda_stream(s), e, 0));
    release_event(e);
  }
  auto* r = new detail::DeviceRecord;
  r->device = ptr;
  r->device_bytes = span_bytes;
  r->producer = s.index;
  r->used = stream_bit(s);
  r->external_release = std::move(release);
  Layout l = layout_of(shape, strides);
  array out = array::uninitialized(std::move(shape), dtype);
  out.set_device_data(r, ptr, l.data_size, std::move(strides), l.flags);
  out.set_status(array::Status::available);
  return out;
}

} // namespace cuda
} // namespace kiln
