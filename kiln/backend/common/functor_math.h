// What the elementwise functors (kiln/primitives/unary_table.h and
// binary_table.h) are written against, so that one text compiles for the
// host (kiln::detail), the CPU JIT's generated kernels (kiln::detail, with
// jit_prelude.h's std names instead of standard headers), and the device
// (kiln::cuda, by nvcc and by NVRTC):
//   KILN_FUNCTORS_BEGIN / KILN_FUNCTORS_END   the namespace of the functors
//   KILN_FN            how a functor's call operator is marked
//   is_same_v, is_float_v, is_integral_v, is_signed_v, is_unsigned_v,
//   is_complex_v, make_unsigned_t             type traits
//   math::exp ... (the libm table), math::abs, math::isnan, math::isinf,
//   math::real, math::imag, math::quiet_nan<T>, math::infinity<T>
// Both sides define the functors in their own namespace, so the host and
// device instances never meet in one program.
#pragma once

#ifndef KILN_JIT_SOURCE
#include "kiln/backend/common/libm_table.h"
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

#include "kiln/backend/cuda/device/complex.cuh"

#define KILN_FUNCTORS_BEGIN namespace kiln::cuda {
#define KILN_FUNCTORS_END }
#define KILN_FN __device__ __forceinline__

namespace kiln::cuda::math {
__device__ __forceinline__ float real(complex64_t z) { return z.re; }
__device__ __forceinline__ float imag(complex64_t z) { return z.im; }
} // namespace kiln::cuda::math

#else

#ifndef KILN_JIT_SOURCE
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "kiln/core/cast.h"
#endif

#define KILN_FUNCTORS_BEGIN namespace kiln::detail {
#define KILN_FUNCTORS_END }
#define KILN_FN inline

namespace kiln::detail {

using std::is_integral_v;
using std::is_same_v;
using std::is_signed_v;
using std::is_unsigned_v;
using std::make_unsigned_t;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T>;

namespace math {

#define KILN_USE_STD(name, arity, cuda) using std::name;
KILN_LIBM_FUNCTIONS(KILN_USE_STD)
#undef KILN_USE_STD
using std::abs;
using std::isinf;
using std::isnan;

template <typename T>
T quiet_nan() {
  return std::numeric_limits<T>::quiet_NaN();
}
template <typename T>
T infinity() {
  return std::numeric_limits<T>::infinity();
}
template <typename Z>
auto real(const Z& z) {
  return z.real();
}
template <typename Z>
auto imag(const Z& z) {
  return z.imag();
}

} // namespace math
} // namespace kiln::detail

#endif
