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

/** Two computed values stored as T (cast_to of each): for float16/bfloat16
 *  from float, one packed conversion (round to nearest even, as two single
 *  ones). */
template <typename T, typename V>
__device__ __forceinline__ void store_pair(V a, V b, T& ya, T& yb) {
#ifndef KILN_DEVICE_NO_HALF
  if constexpr (is_same_v<V, float> && is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    ya = h.x;
    yb = h.y;
    return;
  } else if constexpr (is_same_v<V, float> && is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(a, b);
    ya = h.x;
    yb = h.y;
    return;
  }
#endif
  ya = cast_to<T>(a);
  yb = cast_to<T>(b);
}

/** as_dtype of two values, through store_pair (one packed conversion for
 *  float16/bfloat16). */
template <typename T, typename V>
__device__ __forceinline__ void as_dtype_pair(V a, V b, compute_t<T>& ra,
                                              compute_t<T>& rb) {
  T ya, yb;
  store_pair<T>(a, b, ya, yb);
  ra = cast_to<compute_t<T>>(ya);
  rb = cast_to<compute_t<T>>(yb);
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
