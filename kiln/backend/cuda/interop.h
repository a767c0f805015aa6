// GPU memory shared with other frameworks (DLPack): kiln's device arrays
// handed out without a copy, ordered on the consumer's CUDA stream, and
// other frameworks' device memory taken in without a copy.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "kiln/core/array.h"

namespace kiln::cuda {

/** The CUDA ordinal of the process's GPU. */
int device_ordinal();

/** Makes a's device memory (a evaluated, on the GPU) safe to read on the
 *  consumer stream: the stream waits for a's producer. nullptr waits on
 *  the host instead. */
void export_to_stream(const array& a, cudaStream_t consumer);

/** An array over device memory kiln does not own: `ptr` is the first
 *  element, strides are in elements and span_bytes covers every element.
 *  `release` runs once the array and its views are gone and kiln's streams
 *  have finished with the memory. Reads on kiln's streams wait for
 *  `producer` (the stream the memory was made ready on; nullptr: none). */
array adopt_device_memory(void* ptr, size_t span_bytes, Shape shape,
                          Strides strides, Dtype dtype,
                          std::function<void()> release,
                          cudaStream_t producer);

} // namespace kiln::cuda
