// Helpers for the ahead-of-time kernel tables (aot_*.cu, nvcc only): each
// registers a kernel's host stub under the name the launchers ask for
// (elementwise_kernels.h), so the two builds find the same kernels by name.
#pragma once

#include "kiln/backend/cuda/device/elementwise.cuh"
#include "kiln/backend/cuda/elementwise_kernels.h"
#include "kiln/backend/cuda/kernels.h"

namespace kiln::cuda::aot {

template <typename T>
struct DtypeOf;
#define KILN_DTYPE_OF(T, dt)                     \
  template <>                                    \
  struct DtypeOf<T> {                            \
    static constexpr Dtype value = ::kiln::dt;   \
  };
KILN_DTYPE_OF(bool, bool_)
KILN_DTYPE_OF(uint8_t, uint8)
KILN_DTYPE_OF(uint32_t, uint32)
KILN_DTYPE_OF(uint64_t, uint64)
KILN_DTYPE_OF(int8_t, int8)
KILN_DTYPE_OF(int32_t, int32)
KILN_DTYPE_OF(int64_t, int64)
KILN_DTYPE_OF(__half, float16)
KILN_DTYPE_OF(__nv_bfloat16, bfloat16)
KILN_DTYPE_OF(float, float32)
KILN_DTYPE_OF(double, float64)
#undef KILN_DTYPE_OF

template <typename T>
inline constexpr Dtype dtype_v = DtypeOf<T>::value;

template <typename A, typename B>
inline constexpr int width = elementwise_vec_width(sizeof(A), sizeof(B));

inline void put(AotTable& t, const JitKernel& k, const void* stub) {
  t[k.name] = stub;
}

/** Contiguous and general (32- and 64-bit index) variants of a unary op. */
template <typename Op, typename In, typename Out>
void unary(AotTable& t, const char* op) {
  Dtype i = dtype_v<In>, o = dtype_v<Out>;
  put(t, unary_kernel(op, i, o, "v"),
      reinterpret_cast<const void*>(&unary_v<Op, In, Out, width<In, Out>>));
  put(t, unary_kernel(op, i, o, "g"),
      reinterpret_cast<const void*>(&unary_g<Op, In, Out, uint32_t>));
  put(t, unary_kernel(op, i, o, "g", true),
      reinterpret_cast<const void*>(&unary_g<Op, In, Out, int64_t>));
}

/** The four contiguous variants and the 32-bit general one of a binary op. */
template <typename Op, typename In, typename Out>
void binary(AotTable& t, const char* op) {
  Dtype i = dtype_v<In>, o = dtype_v<Out>;
  constexpr int N = width<In, Out>;
  put(t, binary_kernel(op, i, o, "vv"),
      reinterpret_cast<const void*>(&binary_v<Op, In, Out, N, false, false>));
  put(t, binary_kernel(op, i, o, "sv"),
      reinterpret_cast<const void*>(&binary_v<Op, In, Out, N, true, false>));
  put(t, binary_kernel(op, i, o, "vs"),
      reinterpret_cast<const void*>(&binary_v<Op, In, Out, N, false, true>));
  put(t, binary_kernel(op, i, o, "g"),
      reinterpret_cast<const void*>(&binary_g<Op, In, Out, uint32_t>));
}

} // namespace kiln::cuda::aot
