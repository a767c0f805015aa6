// Arange: out[i] = start + i * step in double, converted to the output type
// (integer types: in 64-bit integers, wrapping into the type)
// as the CPU backend does (16-bit floats through float, as its half types
// convert a double). The multiply and add are spelled as round-to-nearest
// intrinsics so no fused multiply-add changes the rounding.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

template <typename T>
__global__ void arange(T* __restrict__ out, int64_t n, double start,
                       double step) {
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    double v = __dadd_rn(start, __dmul_rn(static_cast<double>(i), step));
    if constexpr (is_integral_v<T>) {
      // Integers (start and step already whole) in 64-bit arithmetic,
      // wrapping into T as the CPU backend does.
      out[i] = static_cast<T>(static_cast<unsigned long long>(
                                  static_cast<long long>(start)) +
                              static_cast<unsigned long long>(i) *
                                  static_cast<unsigned long long>(
                                      static_cast<long long>(step)));
    } else if constexpr (is_half_v<T>) {
      out[i] = cast_to<T>(static_cast<float>(v));
    } else {
      out[i] = cast_to<T>(v);
    }
  }
}

} // namespace kiln::cuda
