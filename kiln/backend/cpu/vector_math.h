// Vectorized libm for contiguous float32/float64 runs. A scalar libm call per
// element is slower than NumPy's SIMD loops (../notes: 40 ms vs 12 ms for exp
// over 16M floats); glibc's libmvec gives SIMD versions of the same functions
// with NaN/Inf handled, selected per CPU (SSE2, AVX2, AVX-512) at load time.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "kiln/primitives/binary_table.h"

namespace kiln::detail {

using VecF32 = void (*)(const float*, float*, size_t);
using VecF64 = void (*)(const double*, double*, size_t);

// `present` says whether the forms exist: comparing a constexpr function
// pointer with nullptr is not a constant expression under -fsanitize=null.
struct VectorFn {
  VecF32 f32;
  VecF64 f64;
  bool present;
};

/** The vectorized form of a functor, or nulls when it has none. */
template <typename Op>
inline constexpr VectorFn vector_fn{nullptr, nullptr, false};

/** Binary forms: out[i] = fn(a[i], b[i]) over n elements, where a scalar
 *  operand (a_one, b_one) is its element 0 throughout. */
template <typename T>
using Vec2 = void (*)(const T*, const T*, T*, size_t, bool, bool);

struct VectorFn2 {
  Vec2<float> f32;
  Vec2<double> f64;
  bool present;
};

template <typename Op>
inline constexpr VectorFn2 vector_fn2{nullptr, nullptr, false};

#define KILN_VECTOR_MATH(Name, fn)                                \
  void v##fn##_f32(const float* in, float* out, size_t n);        \
  void v##fn##_f64(const double* in, double* out, size_t n);      \
  template <>                                                     \
  inline constexpr VectorFn vector_fn<Name>{v##fn##_f32, v##fn##_f64, true};
#define KILN_VECTOR_MATH2(Name, fn)                                       \
  void v##fn##_f32(const float* a, const float* b, float* out, size_t n,  \
                   bool a_one, bool b_one);                               \
  void v##fn##_f64(const double* a, const double* b, double* out,         \
                   size_t n, bool a_one, bool b_one);                     \
  template <>                                                             \
  inline constexpr VectorFn2 vector_fn2<Name>{v##fn##_f32, v##fn##_f64,   \
                                              true};
#include "kiln/backend/cpu/vector_math_list.h"
#undef KILN_VECTOR_MATH
#undef KILN_VECTOR_MATH2

/** Whether y is an integer that a float of its type holds exactly, and if
 *  so whether it is odd: the exponents vpow_integer takes (unfused, and in
 *  the CPU JIT's fused kernels). */
template <typename T>
bool integer_exponent(T y, bool& odd) {
  constexpr T limit = std::is_same_v<T, double> ? T(1LL << 53) : T(1 << 24);
  if (!(std::abs(y) < limit) || std::trunc(y) != y) return false;
  odd = std::fmod(y, T(2)) != T(0);
  return true;
}

/** pow(a[i], y) for an integer-valued y (`odd` when it is odd). */
void vpow_integer_f32(const float* a, float y, bool odd, float* out,
                      size_t n);
void vpow_integer_f64(const double* a, double y, bool odd, double* out,
                      size_t n);

void vsigmoid_f32(const float* in, float* out, size_t n);
void vsigmoid_f64(const double* in, double* out, size_t n);
template <>
inline constexpr VectorFn vector_fn<Sigmoid>{vsigmoid_f32, vsigmoid_f64,
                                             true};

} // namespace kiln::detail
