// Helpers of the kernels generated for fused regions (compiled_source.cpp):
// the generated code evaluates each op with the functors named after its
// primitive and rounds every intermediate to its op's dtype, as the unfused
// kernels do when they store it.
#pragma once

#include "kiln/backend/cuda/device/elementwise.cuh"

namespace kiln::cuda {

/** v as dtype T would hold it, in T's compute type: float16/bfloat16 values
 *  are rounded to their precision and kept as float; bool tests nonzero. */
template <typename T, typename V>
__device__ __forceinline__ compute_t<T> as_dtype(V v) {
  return cast_to<compute_t<T>>(cast_to<T>(v));
}

/** N elements of p at i as one aligned access. */
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p, int64_t i) {
  return *reinterpret_cast<const Vec<T, N>*>(p + i);
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, int64_t i, const Vec<T, N>& v) {
  *reinterpret_cast<Vec<T, N>*>(p + i) = v;
}

} // namespace kiln::cuda
