// The device's own unary functors: the parts of a complex value, the
// conversion of AsType, MLX's float32 erf approximations, and the cheaper
// forms some functors take for some types (OpFor). The functors of the
// unary ops themselves are the table's (kiln/primitives/unary_table.h),
// shared with the host. They see compute types: float16/bfloat16 arrive as
// float.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"
#include "kiln/primitives/unary_table.h"

namespace kiln::cuda {

// The parts of a complex64 value (the Real, Imag and Conjugate primitives).
struct Real {
  __device__ float operator()(complex64_t z) const { return z.re; }
};
struct Imag {
  __device__ float operator()(complex64_t z) const { return z.im; }
};
struct Conjugate {
  __device__ complex64_t operator()(complex64_t z) const {
    return {z.re, -z.im};
  }
};

/** The value itself: the conversion happens at the store (cast_to). */
struct AsType {
  template <typename T>
  __device__ T operator()(T x) const {
    return x;
  }
};

// MLX's float32 erf and erfinv approximations (Float32Erf), bit for bit as
// the CPU backend computes them (backend/cpu/random.cpp): every product and
// sum is spelled as a round-to-nearest intrinsic so nothing contracts into a
// fused multiply-add the host never did, and log is taken in double and
// rounded, which agrees with the host's float log.
namespace mlx_approx {

__device__ __forceinline__ float exp(float x) {
  float y = __fmul_rn(x, 1.442695f);
  float ipart = static_cast<float>(::floor(__dadd_rn(y, 0.5)));
  float f = __fsub_rn(y, ipart);
  float p = 1.535336188319500e-4f;
  p = __fmaf_rn(p, f, 1.339887440266574e-3f);
  p = __fmaf_rn(p, f, 9.618437357674640e-3f);
  p = __fmaf_rn(p, f, 5.550332471162809e-2f);
  p = __fmaf_rn(p, f, 2.402264791363012e-1f);
  p = __fmaf_rn(p, f, 6.931472028550421e-1f);
  p = __fmaf_rn(p, f, 1.0f);
  if (math::isnan(x)) return x;
  if (x > 88.0f) return math::infinity<float>();
  if (x < -88.0f) return 0.0f;
  unsigned int bits = static_cast<unsigned int>(static_cast<int>(ipart) + 127)
                      << 23;
  return __fmul_rn(__uint_as_float(bits), p);
}

__device__ __forceinline__ float erf(float x) {
  float t = __fdiv_rn(1.0f, __fmaf_rn(0.3275911f, ::fabsf(x), 1.0f));
  float r = __fmaf_rn(1.061405429f, t, -1.453152027f);
  r = __fmaf_rn(r, t, 1.421413741f);
  r = __fmaf_rn(r, t, -0.284496736f);
  r = __fmaf_rn(r, t, 0.254829592f);
  float e = -exp(__fmul_rn(-x, x));
  float y = __fmaf_rn(__fmul_rn(e, t), r, 1.0f);
  return x > 0 ? y : -y;
}

__device__ __forceinline__ float erfinv(float a) {
  float t = static_cast<float>(::log(
      static_cast<double>(__fmaf_rn(a, __fsub_rn(0.0f, a), 1.0f))));
  float p;
  if (::fabsf(t) > 6.125f) {
    p = 3.03697567e-10f;
    p = __fmaf_rn(p, t, 2.93243101e-8f);
    p = __fmaf_rn(p, t, 1.22150334e-6f);
    p = __fmaf_rn(p, t, 2.84108955e-5f);
    p = __fmaf_rn(p, t, 3.93552968e-4f);
    p = __fmaf_rn(p, t, 3.02698812e-3f);
    p = __fmaf_rn(p, t, 4.83185798e-3f);
    p = __fmaf_rn(p, t, -2.64646143e-1f);
    p = __fmaf_rn(p, t, 8.40016484e-1f);
  } else {
    p = 5.43877832e-9f;
    p = __fmaf_rn(p, t, 1.43285448e-7f);
    p = __fmaf_rn(p, t, 1.22774793e-6f);
    p = __fmaf_rn(p, t, 1.12963626e-7f);
    p = __fmaf_rn(p, t, -5.61530760e-5f);
    p = __fmaf_rn(p, t, -1.47697632e-4f);
    p = __fmaf_rn(p, t, 2.31468678e-3f);
    p = __fmaf_rn(p, t, 1.15392581e-2f);
    p = __fmaf_rn(p, t, -2.32015476e-1f);
    p = __fmaf_rn(p, t, 8.86226892e-1f);
  }
  return __fmul_rn(a, p);
}

} // namespace mlx_approx

/** Float32Erf (inverse_ false) and its inverse: computed in float32 from
 *  the value rounded to float, returned in the compute type. */
struct Float32Erf {
  template <typename T>
  __device__ T operator()(T x) const {
    return static_cast<T>(mlx_approx::erf(static_cast<float>(x)));
  }
};
struct Float32ErfInv {
  template <typename T>
  __device__ T operator()(T x) const {
    return static_cast<T>(mlx_approx::erfinv(static_cast<float>(x)));
  }
};

/** tanh of a bfloat16 value, for a result rounded to bfloat16: the SFU's
 *  tanh.approx.f32 (one instruction; tanhf is about twenty with two SFU
 *  calls) rounds to the same bfloat16 as tanhf for every one of the 65536
 *  inputs (GpuElementwise.TanhBfloat16EveryValue checks all of them). A
 *  bfloat16 region of the fused `tanh(x*y+1)*0.5+x` is bound by its
 *  instructions, not its bytes, with tanhf. */
struct TanhOfBfloat16 {
  __device__ float operator()(float x) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return math::tanh(x);
#endif
  }
};

/** The functor that computes Op where its arguments are values of T and its
 *  result is rounded to T: Op itself unless a cheaper one gives the same
 *  results there. Unfused kernels and fused regions both use it, so they
 *  agree bit for bit. */
template <typename Op, typename T>
struct OpFor {
  using type = Op;
};
template <>
struct OpFor<Tanh, __nv_bfloat16> {
  using type = TanhOfBfloat16;
};
template <typename Op, typename T>
using op_for = typename OpFor<Op, T>::type;

} // namespace kiln::cuda
