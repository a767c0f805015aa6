// What a custom kernel (fast.cuda_kernel) sees besides its own body: the
// 16-bit float types, fixed-width integers, cooperative groups (as `cg`,
// where the kernel's source or header names `cg` or cooperative_groups:
// the header alone costs NVRTC over a second),
// the Shape and Strides of its generated signature (8 dimensions at most,
// indexed like arrays), `inf`, and elem_to_loc, the offset of a row-major
// element position in a strided input. The kernel itself is generated in
// namespace kiln::cuda::custom (ops/fast_custom_kernel.cpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kiln/backend/cuda/device/traits.cuh" // fixed-width integers

#ifdef KILN_CUSTOM_COOPERATIVE_GROUPS
#include <cooperative_groups.h>
#endif

namespace kiln::cuda::custom {

#ifdef KILN_CUSTOM_COOPERATIVE_GROUPS
namespace cg = cooperative_groups;
#endif

constexpr int max_ndim = 8;

/** An input's shape or strides, passed by value; entries past its ndim are
 *  zero. */
template <typename T>
struct Dims {
  T v[max_ndim];
  __device__ __forceinline__ T operator[](int i) const { return v[i]; }
  __device__ __forceinline__ const T* data() const { return v; }
};
using Shape = Dims<int32_t>;
using Strides = Dims<int64_t>;


/** The offset (in elements) of element `elem` of a row-major walk over
 *  `shape` in an array with `strides`. */
template <typename IdxT = int64_t>
__device__ __forceinline__ IdxT elem_to_loc(IdxT elem, const int32_t* shape,
                                            const int64_t* strides,
                                            int ndim) {
  IdxT loc = 0;
  for (int i = ndim - 1; i >= 0 && elem > 0; --i) {
    loc += (elem % shape[i]) * static_cast<IdxT>(strides[i]);
    elem /= shape[i];
  }
  return loc;
}
template <typename IdxT = int64_t>
__device__ __forceinline__ IdxT elem_to_loc(IdxT elem, const Shape& shape,
                                            const Strides& strides,
                                            int ndim) {
  return elem_to_loc<IdxT>(elem, shape.data(), strides.data(), ndim);
}

} // namespace kiln::cuda::custom

// float infinity, spelled as kernels written for MLX spell it (a macro
// there too). Defined last, after every header.
#define inf (::kiln::cuda::math::infinity<float>())
