// Array buffers on the GPU. A buffer lives in one place (host or device
// memory) and gets a read-only copy on the other side when that side first
// reads it: the host reading a GPU array (data<T>(), item, NumPy) waits for
// its producer and copies it back once; a GPU kernel reading a host array
// uploads it once. Arrays are immutable and host kernels never write a buffer
// with a device side (array::is_donatable), so the two copies never differ.
#pragma once

#include "kiln/backend/cuda/allocator.h"
#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::cuda {

/** Device pointer to a's first element for a kernel on kiln stream s. Orders
 *  s after the stream that produced a, uploads a host buffer, and records s
 *  as a user of the memory (it is reused only after s is done with it). */
void* device_ptr(const array& a, const Stream& s);
template <typename T>
T* device_ptr(const array& a, const Stream& s) {
  return static_cast<T*>(device_ptr(a, s));
}

/** Stream s's bit in the allocator's used-streams masks (device_free). */
uint64_t stream_bit(const Stream& s);

/** Gives out a fresh device buffer of data_size elements with this layout,
 *  written by stream s. */
void set_device_output(array& out, size_t data_size, Strides strides,
                       array::Flags flags, const Stream& s);
/** A fresh row-major device buffer. */
void set_device_output(array& out, const Stream& s);

/** Gives in's device buffer, with its layout, to out when nothing else holds
 *  it, its itemsize matches, no host copy of it exists and no stream other
 *  than s has used it (so no kernel elsewhere still reads it). The kernel on
 *  s then writes over its input: callers donate only to kernels that read
 *  each element before writing the same position. */
bool donate_device_buffer(const array& in, array& out, const Stream& s);

/** Device scratch for kernels queued on stream s, given back when it goes
 *  out of scope: the allocator reuses it on s only after the work queued
 *  before, and on other streams only behind an event. */
struct Scratch {
  Scratch(size_t nbytes, const Stream& s)
      : ptr(device_malloc(nbytes, s.index)), used(stream_bit(s)) {}
  ~Scratch() { device_free(ptr, used); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* ptr;
  uint64_t used;
};

} // namespace kiln::cuda
