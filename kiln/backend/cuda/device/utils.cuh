// Device-side basics shared by every kernel family: element types, compute
// types, astype's conversions and aligned vectors. Included by the nvcc
// kernels by path and handed to NVRTC under the same name, so both builds
// compile these very bytes. Device headers only: no host std headers.
#pragma once

// Fused kernels without 16-bit floats define KILN_DEVICE_NO_HALF before
// including: the fp16/bf16 headers are most of NVRTC's parse time for a
// small kernel. Declared-only stand-ins keep the type tests below valid.
#ifdef KILN_DEVICE_NO_HALF
struct __half;
struct __nv_bfloat16;
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "kiln/backend/cuda/device/complex.cuh"
#include "kiln/backend/cuda/device/traits.cuh"

namespace kiln::cuda {

template <typename T>
inline constexpr bool is_half_v =
    is_same_v<T, __half> || is_same_v<T, __nv_bfloat16>;

/** float16/bfloat16 compute in float and round once at the store, as on the
 *  CPU; every other type computes as itself. */
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<__half> {
  using type = float;
};
template <>
struct ComputeType<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeType<T>::type;

/** astype's conversions (kiln/core/cast.h): anything -> bool tests for
 *  nonzero, 16-bit floats go through float (double rounds directly). */
template <typename To, typename From>
__device__ __forceinline__ To cast_to(From v) {
  if constexpr (is_same_v<To, From>) {
    return v;
  } else if constexpr (is_same_v<To, bool>) {
    if constexpr (is_half_v<From>) {
      return static_cast<float>(v) != 0.0f;
    } else {
      return v != From(0);
    }
  } else if constexpr (is_complex_v<From>) {
    // complex -> real takes the real part.
    return cast_to<To>(v.re);
  } else if constexpr (is_complex_v<To>) {
    return To(cast_to<float>(v), 0.0f);
  } else if constexpr (is_half_v<From>) {
    return static_cast<To>(static_cast<float>(v));
#ifndef KILN_DEVICE_NO_HALF
  } else if constexpr (is_same_v<To, __half>) {
    if constexpr (is_same_v<From, double>) {
      return __double2half(v);
    } else {
      return __float2half_rn(static_cast<float>(v));
    }
  } else if constexpr (is_same_v<To, __nv_bfloat16>) {
    if constexpr (is_same_v<From, double>) {
      return __double2bfloat16(v);
    } else {
      return __float2bfloat16_rn(static_cast<float>(v));
    }
#endif
  } else {
    return static_cast<To>(v);
  }
}

/** N elements loaded or stored as one access (16 bytes for the widest). */
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ bool is_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

/** Declared first by a kernel that the launch queue may start before the
 *  previous kernel on its stream has finished (a programmatic dependency,
 *  LaunchShape::programmatic; Hopper's griddepcontrol): waits until that
 *  kernel has finished and its writes are visible, and on leaving scope
 *  lets the next kernel begin its launch. A chain of tiny kernels in a
 *  graph then takes 0.67-0.77 us per kernel on an H200 instead of 0.91.
 *  Both are no-ops in a kernel launched plainly. */
struct GridDependency {
  __device__ __forceinline__ GridDependency() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
  __device__ __forceinline__ ~GridDependency() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
  }
};

/** Grid-stride loops: the first element this thread handles, and the
 *  grid's step, in elements (N per thread). */
template <int N>
__device__ __forceinline__ int64_t first_index() {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
}
template <int N>
__device__ __forceinline__ int64_t grid_step() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x * N;
}

/** Dimensions a general (strided) kernel handles after collapsing. */
inline constexpr int max_ndim = 10;

/** Shape and K operands' strides, passed by value as a kernel parameter. */
template <int K>
struct Strided {
  int ndim;
  int32_t shape[max_ndim];
  int64_t strides[K][max_ndim];
};

/** Element offsets of each operand for row-major position i; the divisions
 *  run in IdxT (32-bit unless the array is huge), the offsets in int64. */
template <typename IdxT, int K>
__device__ __forceinline__ void strided_offsets(IdxT i, const Strided<K>& l,
                                                int64_t (&off)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    IdxT n = static_cast<IdxT>(l.shape[d]);
    IdxT q = i / n;
    int64_t r = static_cast<int64_t>(i - q * n);
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += r * l.strides[k][d];
    i = q;
  }
}

} // namespace kiln::cuda
