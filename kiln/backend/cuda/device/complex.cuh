// complex64 on the device: two floats, 8-byte aligned, laid out as the
// host's std::complex<float>, with the arithmetic and the functions the
// elementwise kernels instantiate for it. The formulas are the textbook
// ones in float (division by Smith's method, which avoids overflow in
// |b|^2), so results agree with the CPU's std::complex to float rounding
// on finite values; NaN and infinity propagation is not C99 Annex G's.
#pragma once

#include "kiln/backend/cuda/device/traits.cuh"

namespace kiln::cuda {

struct alignas(8) complex64_t {
  float re, im;
  complex64_t() = default;
  __device__ constexpr complex64_t(float r, float i = 0.0f) : re(r), im(i) {}
};

template <typename T>
inline constexpr bool is_complex_v = is_same_v<T, complex64_t>;

__device__ __forceinline__ complex64_t operator+(complex64_t a,
                                                 complex64_t b) {
  return {a.re + b.re, a.im + b.im};
}
__device__ __forceinline__ complex64_t operator-(complex64_t a,
                                                 complex64_t b) {
  return {a.re - b.re, a.im - b.im};
}
__device__ __forceinline__ complex64_t operator-(complex64_t a) {
  return {-a.re, -a.im};
}
__device__ __forceinline__ complex64_t operator*(complex64_t a,
                                                 complex64_t b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
__device__ __forceinline__ complex64_t operator/(complex64_t a,
                                                 complex64_t b) {
  if (::fabsf(b.re) >= ::fabsf(b.im)) {
    float r = b.im / b.re, d = b.re + r * b.im;
    return {(a.re + a.im * r) / d, (a.im - a.re * r) / d};
  }
  float r = b.re / b.im, d = b.im + r * b.re;
  return {(a.re * r + a.im) / d, (a.im * r - a.re) / d};
}
__device__ __forceinline__ bool operator==(complex64_t a, complex64_t b) {
  return a.re == b.re && a.im == b.im;
}
__device__ __forceinline__ bool operator!=(complex64_t a, complex64_t b) {
  return !(a == b);
}
// Complex values order as MLX's (and the CPU's functors): by real part,
// then imaginary part; a NaN in the part compared makes the comparison false.
#define KILN_COMPLEX_ORDER(op)                                           \
  __device__ __forceinline__ bool operator op(complex64_t a,             \
                                              complex64_t b) {           \
    return a.re == b.re ? a.im op b.im : a.re op b.re;                   \
  }
KILN_COMPLEX_ORDER(<)
KILN_COMPLEX_ORDER(<=)
KILN_COMPLEX_ORDER(>)
KILN_COMPLEX_ORDER(>=)
#undef KILN_COMPLEX_ORDER

namespace math {

__device__ __forceinline__ float abs(complex64_t z) {
  return ::hypotf(z.re, z.im);
}
__device__ __forceinline__ complex64_t exp(complex64_t z) {
  float e = ::expf(z.re), s, c;
  ::sincosf(z.im, &s, &c);
  return {e * c, e * s};
}
__device__ __forceinline__ complex64_t log(complex64_t z) {
  return {::logf(abs(z)), ::atan2f(z.im, z.re)};
}
__device__ __forceinline__ complex64_t log10(complex64_t z) {
  complex64_t l = log(z);
  constexpr float inv_ln10 = 0.43429448190325176f;
  return {l.re * inv_ln10, l.im * inv_ln10};
}
// log1p and log2 as MLX's: log(1 + z), log(z) / ln 2.
__device__ __forceinline__ complex64_t log1p(complex64_t z) {
  return log(complex64_t(1.0f + z.re, z.im));
}
__device__ __forceinline__ complex64_t log2(complex64_t z) {
  complex64_t l = log(z);
  constexpr float inv_ln2 = 1.4426950408889634f;
  return {l.re * inv_ln2, l.im * inv_ln2};
}
/** Each part rounded, halves to even (round of a complex value). */
__device__ __forceinline__ complex64_t nearbyint(complex64_t z) {
  return {::rintf(z.re), ::rintf(z.im)};
}
/** The principal root, the branch cut along the negative reals (the sign of
 *  a zero imaginary part picks the side, as in std::sqrt). */
__device__ __forceinline__ complex64_t sqrt(complex64_t z) {
  if (z.re == 0.0f && z.im == 0.0f) return {0.0f, z.im};
  float t = ::sqrtf(0.5f * (::fabsf(z.re) + abs(z)));
  if (z.re >= 0.0f) return {t, z.im / (2.0f * t)};
  return {::fabsf(z.im) / (2.0f * t), ::copysignf(t, z.im)};
}
__device__ __forceinline__ complex64_t sin(complex64_t z) {
  float s, c;
  ::sincosf(z.re, &s, &c);
  return {s * ::coshf(z.im), c * ::sinhf(z.im)};
}
__device__ __forceinline__ complex64_t cos(complex64_t z) {
  float s, c;
  ::sincosf(z.re, &s, &c);
  return {c * ::coshf(z.im), -s * ::sinhf(z.im)};
}
__device__ __forceinline__ complex64_t sinh(complex64_t z) {
  float s, c;
  ::sincosf(z.im, &s, &c);
  return {::sinhf(z.re) * c, ::coshf(z.re) * s};
}
__device__ __forceinline__ complex64_t cosh(complex64_t z) {
  float s, c;
  ::sincosf(z.im, &s, &c);
  return {::coshf(z.re) * c, ::sinhf(z.re) * s};
}
/** tanh(x + iy) = (sinh 2x + i sin 2y) / (cosh 2x + cos 2y), with the limit
 *  +-1 once cosh 2x overflows float. */
__device__ __forceinline__ complex64_t tanh(complex64_t z) {
  if (::fabsf(z.re) > 40.0f) return {::copysignf(1.0f, z.re), 0.0f};
  float d = ::coshf(2.0f * z.re) + ::cosf(2.0f * z.im);
  return {::sinhf(2.0f * z.re) / d, ::sinf(2.0f * z.im) / d};
}
/** tan z = -i tanh(iz). */
__device__ __forceinline__ complex64_t tan(complex64_t z) {
  complex64_t t = tanh(complex64_t(-z.im, z.re));
  return {t.im, -t.re};
}

} // namespace math

} // namespace kiln::cuda
