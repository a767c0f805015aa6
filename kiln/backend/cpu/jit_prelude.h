// The start of every CPU JIT source (embedded at build time, never compiled
// by the build itself). It declares the few std names that half_bits.h and
// the functor headers use, without standard headers: parsing <cmath> alone
// would take most of a kernel's build time. The generated source adds the libm
// declarations (with libmvec's SIMD forms where the machine has them) after
// this text and before the functors.
#pragma once

#define KILN_JIT_SOURCE 1
#define CHAR_BIT __CHAR_BIT__

typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __SIZE_TYPE__ size_t;

// GCC maps these declarations onto libmvec's vector functions; clang has no
// such attribute and calls the scalar ones.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KILN_SIMD __attribute__((simd("notinbranch")))
#else
#define KILN_SIMD
#endif

namespace std {

using ::size_t;

// Arithmetic type traits, as <type_traits> defines them for these types.
template <class T>
struct kiln_arith {
  static constexpr bool integral = false, floating = false, is_signed = false;
  using unsigned_type = T;
};
#define KILN_ARITH(T, I, F, S, U)                                        \
  template <>                                                            \
  struct kiln_arith<T> {                                                 \
    static constexpr bool integral = I, floating = F, is_signed = S;     \
    using unsigned_type = U;                                             \
  };
KILN_ARITH(bool, true, false, false, bool)
#ifdef __CHAR_UNSIGNED__
KILN_ARITH(char, true, false, false, unsigned char)
#else
KILN_ARITH(char, true, false, true, unsigned char)
#endif
KILN_ARITH(signed char, true, false, true, unsigned char)
KILN_ARITH(unsigned char, true, false, false, unsigned char)
KILN_ARITH(short, true, false, true, unsigned short)
KILN_ARITH(unsigned short, true, false, false, unsigned short)
KILN_ARITH(int, true, false, true, unsigned int)
KILN_ARITH(unsigned int, true, false, false, unsigned int)
KILN_ARITH(long, true, false, true, unsigned long)
KILN_ARITH(unsigned long, true, false, false, unsigned long)
KILN_ARITH(long long, true, false, true, unsigned long long)
KILN_ARITH(unsigned long long, true, false, false, unsigned long long)
KILN_ARITH(float, false, true, true, float)
KILN_ARITH(double, false, true, true, double)
#undef KILN_ARITH

template <class A, class B>
inline constexpr bool is_same_v = false;
template <class A>
inline constexpr bool is_same_v<A, A> = true;
template <class T>
inline constexpr bool is_integral_v = kiln_arith<T>::integral;
template <class T>
inline constexpr bool is_floating_point_v = kiln_arith<T>::floating;
template <class T>
inline constexpr bool is_signed_v = kiln_arith<T>::is_signed;
template <class T>
inline constexpr bool is_unsigned_v =
    kiln_arith<T>::integral && !kiln_arith<T>::is_signed;
template <class T>
using make_unsigned_t = typename kiln_arith<T>::unsigned_type;

template <class T>
struct numeric_limits {
  static T quiet_NaN() { return static_cast<T>(__builtin_nan("")); }
  static T infinity() { return static_cast<T>(__builtin_inf()); }
};

inline void* memcpy(void* dst, const void* src, size_t n) {
  return __builtin_memcpy(dst, src, n);
}

inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isnan(double x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isinf(double x) { return __builtin_isinf(x); }
inline float abs(float x) { return __builtin_fabsf(x); }
inline double abs(double x) { return __builtin_fabs(x); }
inline float copysign(float x, float s) { return __builtin_copysignf(x, s); }
inline double copysign(double x, double s) { return __builtin_copysign(x, s); }

} // namespace std

namespace kiln {

// Fused regions hold real types only, and kernels compute in compute types
// (16-bit floats widened to float), so casts are plain conversions.
template <class T>
inline constexpr bool is_complex_v = false;
template <class T>
inline constexpr bool is_half_v = false;

template <class To, class From>
inline To cast_to(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

} // namespace kiln
