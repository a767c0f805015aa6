// Copies whose window start is read from an integer array on the device
// (DynamicSlice, DynamicSliceUpdate), so no start value travels to the host.
// A negative start wraps once, then it is clamped so the window fits, as
// the CPU backend does (backend/cpu/slicing.cpp).
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

/** Where the start values are and what they index: start value k (at
 *  element offset k * start_stride) sets the window along an axis of size
 *  dim[k] and element stride stride[k], for a window of window[k]. */
struct DynamicStart {
  int num_axes;
  int64_t start_stride;
  int64_t dim[max_ndim];
  int64_t window[max_ndim];
  int64_t stride[max_ndim];
};

template <typename I>
__device__ __forceinline__ int64_t dynamic_offset(const I* start,
                                                  const DynamicStart& d) {
  int64_t offset = 0;
  for (int k = 0; k < d.num_axes; ++k) {
    int64_t v = static_cast<int64_t>(start[k * d.start_stride]);
    if (v < 0) v += d.dim[k];
    int64_t last = d.dim[k] - d.window[k];
    last = last < 0 ? 0 : last;
    v = v < 0 ? 0 : (v > last ? last : v);
    offset += v * d.stride[k];
  }
  return offset;
}

/** Copies in to out over the collapsed shape l (operand 0: in, 1: out),
 *  converting In to Out, with the dynamic offset added to in's offsets
 *  (IntoOut false: a window read out of in) or out's (IntoOut true: a
 *  window written into out). */
template <typename In, typename Out, typename I, typename IdxT, bool IntoOut>
__global__ void dynamic_copy(const In* __restrict__ in, Out* __restrict__ out,
                             const I* __restrict__ start, int64_t n,
                             const __grid_constant__ Strided<2> l,
                             const __grid_constant__ DynamicStart d) {
  int64_t base = dynamic_offset(start, d);
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    int64_t off[2];
    strided_offsets(static_cast<IdxT>(i), l, off);
    if constexpr (IntoOut) {
      out[base + off[1]] = cast_to<Out>(in[off[0]]);
    } else {
      out[off[1]] = cast_to<Out>(in[base + off[0]]);
    }
  }
}

} // namespace kiln::cuda
