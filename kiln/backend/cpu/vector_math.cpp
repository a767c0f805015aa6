// Built with -ffast-math (see kiln/CMakeLists.txt), which is what lets GCC
// call libmvec's SIMD functions. Nothing else lives in this file: fast-math
// may assume no NaN/Inf here, and these loops only map one call per element
// (libmvec itself returns NaN for NaN and Inf for Inf). target_clones builds
// an AVX-512, an AVX2 and a baseline copy, chosen at load time.
#include <cmath>
#include <cstddef>

#include "kiln/backend/cpu/simd_clones.h"
#include "kiln/backend/cpu/vector_math.h"

namespace kiln::detail {

// out may be exactly in (a donated buffer): each index is read before it is
// written and no other index is touched, so there is no real dependence;
// ivdep vectorizes without the runtime overlap check that would fall back to
// scalar code in that case.
#define KILN_MAP_LOOP(fn)                                              \
  _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) out[i] = std::fn(in[i]);

#define KILN_VECTOR_MATH(Name, fn)                                      \
  KILN_SIMD_CLONES void    \
      v##fn##_f32(const float* in, float* out, size_t n) {  \
    KILN_MAP_LOOP(fn)                                                   \
  }                                                                     \
  KILN_SIMD_CLONES void    \
      v##fn##_f64(const double* in, double* out, size_t n) {\
    KILN_MAP_LOOP(fn)                                                   \
  }

// One loop per operand pattern, so each is a plain map GCC vectorizes (a
// scalar operand is broadcast, not read with step 0).
#define KILN_MAP2_LOOPS(fn)                                              \
  if (a_one) {                                                           \
    const auto x = a[0];                                                 \
    _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) out[i] =        \
        std::fn(x, b[i]);                                                \
  } else if (b_one) {                                                    \
    const auto y = b[0];                                                 \
    _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) out[i] =        \
        std::fn(a[i], y);                                                \
  } else {                                                               \
    _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) out[i] =        \
        std::fn(a[i], b[i]);                                             \
  }

#define KILN_VECTOR_MATH2(Name, fn)                                       \
  KILN_SIMD_CLONES void      \
      v##fn##_f32(const float* a, const float* b, float* out, size_t n,   \
                  bool a_one, bool b_one) {                               \
    KILN_MAP2_LOOPS(fn)                                                   \
  }                                                                       \
  KILN_SIMD_CLONES void      \
      v##fn##_f64(const double* a, const double* b, double* out,          \
                  size_t n, bool a_one, bool b_one) {                     \
    KILN_MAP2_LOOPS(fn)                                                   \
  }
#include "kiln/backend/cpu/vector_math_list.h"
#undef KILN_VECTOR_MATH
#undef KILN_VECTOR_MATH2

// pow(a, y) for an integer y: pow(|a|, y), negated for a negative a when y
// is odd. libmvec's pow (and glibc's scalar powf) take a slow path for every
// negative base; |a| keeps them on the fast one. Exact for every a: NaN,
// +-inf and +-0 included.
#define KILN_POW_INTEGER(T)                                             \
  if (odd) {                                                            \
    _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) out[i] =       \
        std::copysign(std::pow(std::abs(a[i]), y), a[i]);              \
  } else {                                                              \
    _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) out[i] =       \
        std::pow(std::abs(a[i]), y);                                    \
  }
KILN_SIMD_CLONES void
vpow_integer_f32(const float* a, float y, bool odd, float* out, size_t n) {
  KILN_POW_INTEGER(float)
}
KILN_SIMD_CLONES void
vpow_integer_f64(const double* a, double y, bool odd, double* out,
                 size_t n) {
  KILN_POW_INTEGER(double)
}
#undef KILN_POW_INTEGER

// Sigmoid's form (primitives/unary_table.h) around libmvec's exp: exp(-|x|) is at most
// 1, so no inf arises here (this file may assume there is none).
#define KILN_SIGMOID(T)                                                 \
  _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) {                \
    T x = in[i], t = std::exp(-std::abs(x));                            \
    out[i] = x >= T(0) ? T(1) / (T(1) + t) : t / (T(1) + t);            \
  }
KILN_SIMD_CLONES void
vsigmoid_f32(const float* in, float* out, size_t n) {
  KILN_SIGMOID(float)
}
KILN_SIMD_CLONES void
vsigmoid_f64(const double* in, double* out, size_t n) {
  KILN_SIGMOID(double)
}
#undef KILN_SIGMOID

} // namespace kiln::detail
