// eval_gpu of the distributed primitives, for NCCL groups: row-major device
// operands (the input's own buffer when it is one), a fresh device output
// (or the input's buffer for an in-place all_sum), and the collective queued
// on the primitive's CUDA stream, never waited for here.
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/distributed/primitives.h"

namespace kiln::distributed {

namespace {

// MPI groups run on the CPU stream (the ops choose it), so only a device
// communicator reaches eval_gpu.
detail::Communicator& device_comm(const DistributedPrimitive& p) {
  auto& c = p.comm();
  if (!c.on_device()) {
    throw std::logic_error(std::string("[") + p.name() + "] the '" +
                           c.backend() + "' group reached the GPU.");
  }
  return c;
}

array row_major_on(const array& x, const Stream& s, const char* what) {
  array out = x;
  if (!cuda::row_contiguous(x, out, s)) {
    throw std::invalid_argument(std::string("[") + what + "] cannot copy " +
                                dtype_name(x.dtype()) + " on the GPU.");
  }
  return out;
}

// The shape check, the input row-major on the device, and a fresh device
// output: what the gathering and scattering collectives start with.
const void* prepare(const DistributedPrimitive& p, const array& x,
                    array& out, array& in) {
  const Stream& s = p.stream();
  detail::check_agree(device_comm(p), p.name(), x);
  in = row_major_on(x, s, p.name());
  const void* src = cuda::device_ptr(in, s);
  cuda::set_device_output(out, s);
  return src;
}

} // namespace

void AllReduce::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& c = device_comm(*this);
  const Stream& s = stream();
  detail::check_agree(c, name(), inputs[0]);
  array in = row_major_on(inputs[0], s, name());
  void* stream_ptr = cuda::cuda_stream(s);
  if (in.data_size() == in.size() && cuda::donate_device_buffer(in, out, s)) {
    void* p = cuda::device_ptr(out, s);
    c.all_reduce(p, p, out.size(), out.dtype(), op(), name(), stream_ptr);
    return;
  }
  const void* src = cuda::device_ptr(in, s);
  cuda::set_device_output(out, s);
  c.all_reduce(src, cuda::device_ptr(out, s), out.size(), out.dtype(), op(),
               name(), stream_ptr);
}

void AllGather::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  array in = inputs[0];
  const void* src = prepare(*this, inputs[0], out, in);
  comm().all_gather(src, cuda::device_ptr(out, s), in.nbytes(), name(),
                    cuda::cuda_stream(s));
}

void ReduceScatter::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  array in = inputs[0];
  const void* src = prepare(*this, inputs[0], out, in);
  comm().reduce_scatter(src, cuda::device_ptr(out, s), out.size(), in.dtype(),
                        detail::ReduceOp::sum, name(), cuda::cuda_stream(s));
}

void Send::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& c = device_comm(*this);
  const Stream& s = stream();
  detail::check_transfer(c, name(), inputs[0], dst(), true);
  array in = row_major_on(inputs[0], s, name());
  c.send(cuda::device_ptr(in, s), in.nbytes(), dst(), name(),
         cuda::cuda_stream(s));
  out.copy_shared_buffer(inputs[0]);
}

void Recv::eval_gpu(const std::vector<array>&, array& out) {
  auto& c = device_comm(*this);
  const Stream& s = stream();
  detail::check_transfer(c, name(), out, src(), false);
  cuda::set_device_output(out, s);
  c.recv(cuda::device_ptr(out, s), out.nbytes(), src(), name(),
         cuda::cuda_stream(s));
}

} // namespace kiln::distributed
