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
/** Division by a real number, part by part (as std::complex's). */
__device__ __forceinline__ complex64_t operator/(complex64_t a, float b) {
  return {a.re / b, a.im / b};
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

// The inverse functions and power, computed in double (float inputs keep
// z * z + 1 finite there) and rounded once. asinh and atanh are odd and
// commute with conjugation, so they are evaluated on |re| + i|im|, where
// the formulas have no cancellation and meet no branch cut, and the signs
// are put back part by part: the cuts and the signed zeros on them follow
// C99 (glibc's, which the CPU's std::complex calls). asin, atan are
// -i asinh(iz) and -i atanh(iz), acos is pi/2 - asin; acosh is
// log(z + sqrt(z + 1) sqrt(z - 1)), whose principal roots give C99's cut.
// Finite inputs only: infinities and NaNs follow the formulas, not
// C99's special cases.
namespace complex_double {

struct zd {
  double re, im;
};
// Infinity and NaN for both compilers (the host side serves checks of the
// formulas against the C library).
__host__ __device__ inline double infinity() {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(0x7ff0000000000000ll);
#else
  return __builtin_huge_val();
#endif
}
__host__ __device__ inline double quiet_nan() {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(0x7ff8000000000000ll);
#else
  return __builtin_nan("");
#endif
}
__host__ __device__ inline zd add(zd a, zd b) {
  return {a.re + b.re, a.im + b.im};
}
__host__ __device__ inline zd mul(zd a, zd b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
/** The principal root; a zero imaginary part's sign picks the side of the
 *  cut along the negative reals. */
__host__ __device__ inline zd sqrt(zd z) {
  if (z.re == 0.0 && z.im == 0.0) return {0.0, z.im};
  double t = ::sqrt(0.5 * (::fabs(z.re) + ::hypot(z.re, z.im)));
  if (z.re >= 0.0) return {t, z.im / (2.0 * t)};
  return {::fabs(z.im) / (2.0 * t), ::copysign(t, z.im)};
}
__host__ __device__ inline zd log(zd z) {
  return {::log(::hypot(z.re, z.im)), ::atan2(z.im, z.re)};
}
/** asinh of x + iy with x, y >= 0: log(q + sqrt(q^2 + 1)), or its series
 *  z - z^3/6 + 3z^5/40 near 0, where the logarithm's argument nears 1. */
__host__ __device__ inline zd asinh_first_quadrant(double x, double y) {
  zd q{x, y};
  if (::hypot(x, y) < 1e-2) {
    zd q2 = mul(q, q), q3 = mul(q2, q), q5 = mul(q3, q2);
    return {x - q3.re / 6.0 + 3.0 * q5.re / 40.0,
            y - q3.im / 6.0 + 3.0 * q5.im / 40.0};
  }
  return log(add(q, sqrt(add(mul(q, q), {1.0, 0.0}))));
}
/** atanh of x + iy with x, y >= 0: the real part 1/4 log1p(4x / |1 - z|^2)
 *  and the imaginary part 1/2 atan2(2y, (1 - x)(1 + x) - y^2). */
__host__ __device__ inline zd atanh_first_quadrant(double x, double y) {
  double u = 1.0 - x;
  return {0.25 * ::log1p(4.0 * x / (u * u + y * y)),
          0.5 * ::atan2(2.0 * y, u * (1.0 + x) - y * y)};
}
/** f (an odd function commuting with conjugation) of re + i im. */
template <typename F>
__host__ __device__ inline zd odd_from_first_quadrant(double re, double im,
                                                      F f) {
  zd w = f(::fabs(re), ::fabs(im));
  return {::copysign(w.re, re), ::copysign(w.im, im)};
}
__host__ __device__ inline zd asinh(zd z) {
  return odd_from_first_quadrant(z.re, z.im, asinh_first_quadrant);
}
__host__ __device__ inline zd atanh(zd z) {
  return odd_from_first_quadrant(z.re, z.im, atanh_first_quadrant);
}
/** -i f(iz). */
template <typename F>
__host__ __device__ inline zd rotated(zd z, F f) {
  zd w = f(zd{-z.im, z.re});
  return {w.im, -w.re};
}
__host__ __device__ inline zd asin(zd z) { return rotated(z, asinh); }
__host__ __device__ inline zd atan(zd z) { return rotated(z, atanh); }
__host__ __device__ inline zd acos(zd z) {
  zd a = asin(z);
  return {1.5707963267948966 - a.re, -a.im};
}
/** The real part is >= 0 (|z + r| >= 1): its absolute value keeps a
 *  rounding below 1 from giving -0-like tiny negatives where C99 has +0. */
__host__ __device__ inline zd acosh(zd z) {
  zd r = mul(sqrt({z.re + 1.0, z.im}), sqrt({z.re - 1.0, z.im}));
  zd w = log(add(z, r));
  return {::fabs(w.re), w.im};
}
/** x^y = exp(y log x); a zero x gives what the CPU's cpowf does: 0 for a
 *  positive real part of y, inf + i NaN for a negative one, NaN else. */
__host__ __device__ inline zd pow(zd x, zd y) {
  if (x.re == 0.0 && x.im == 0.0) {
    if (y.re > 0.0) return {0.0, -0.0};
    if (y.re < 0.0) return {infinity(), quiet_nan()};
    return {quiet_nan(), quiet_nan()};
  }
  zd l = mul(y, log(x));
  double e = ::exp(l.re);
  return {e * ::cos(l.im), e * ::sin(l.im)};
}

} // namespace complex_double

#define KILN_COMPLEX_VIA_DOUBLE(name)                                   \
  __device__ inline complex64_t name(complex64_t z) {                   \
    complex_double::zd w = complex_double::name({z.re, z.im});          \
    return {static_cast<float>(w.re), static_cast<float>(w.im)};        \
  }
KILN_COMPLEX_VIA_DOUBLE(asin)
KILN_COMPLEX_VIA_DOUBLE(acos)
KILN_COMPLEX_VIA_DOUBLE(atan)
KILN_COMPLEX_VIA_DOUBLE(asinh)
KILN_COMPLEX_VIA_DOUBLE(acosh)
KILN_COMPLEX_VIA_DOUBLE(atanh)
#undef KILN_COMPLEX_VIA_DOUBLE
__device__ inline complex64_t pow(complex64_t x, complex64_t y) {
  complex_double::zd w = complex_double::pow({x.re, x.im}, {y.re, y.im});
  return {static_cast<float>(w.re), static_cast<float>(w.im)};
}

} // namespace math

} // namespace kiln::cuda
