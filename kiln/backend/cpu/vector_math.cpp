// Built with -ffast-math (see kiln/CMakeLists.txt), which is what lets GCC
// call libmvec's SIMD functions. Nothing else lives in this file: fast-math
// may assume no NaN/Inf here, and these loops only map one call per element
// (libmvec itself returns NaN for NaN and Inf for Inf). target_clones builds
// an AVX-512, an AVX2 and a baseline copy, chosen at load time.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kiln/backend/cpu/simd_clones.h"
#include "kiln/backend/cpu/vector_math.h"

namespace kiln::detail {

// Every element goes through the same vector code. Each op's loop is a
// body compiled once per CPU (target_clones) and never inlined; the body
// runs over the largest multiple of kBody elements, where the vectorized
// loop never reaches its epilogue (kBody is a multiple of every vector
// width times the unrolling GCC picks for these loops: 16 floats in one
// AVX-512 call, two AVX2 calls, four SSE ones), then over a copy of the
// rest padded with its last element. A loop left to finish on its own ends
// in narrower vectors and scalar libm, which rounds differently from
// libmvec: an element's result would depend on the array's length.
// (Elementwise.AnElementIgnoresTheArrayLength checks every remainder.)
constexpr size_t kBody = 16;

template <typename T, typename Body>
inline void padded(const T* in, T* out, size_t n, Body body) {
  size_t whole = n / kBody * kBody;
  if (whole > 0) body(in, out, whole);
  if (whole == n) return;
  size_t m = n - whole;
  T buf[kBody];
  for (size_t j = 0; j < kBody; ++j) buf[j] = in[whole + std::min(j, m - 1)];
  body(buf, buf, kBody);
  std::copy(buf, buf + m, out + whole);
}

template <typename T, typename Body>
inline void padded2(const T* a, const T* b, T* out, size_t n, bool a_one,
                    bool b_one, Body body) {
  size_t whole = n / kBody * kBody;
  if (whole > 0) {
    body(a, b, out, whole, a_one, b_one);
  }
  if (whole == n) return;
  size_t m = n - whole;
  T x[kBody], y[kBody];
  for (size_t j = 0; j < kBody; ++j) {
    x[j] = a_one ? a[0] : a[whole + std::min(j, m - 1)];
    y[j] = b_one ? b[0] : b[whole + std::min(j, m - 1)];
  }
  body(a_one ? a : x, b_one ? b : y, x, kBody, a_one, b_one);
  std::copy(x, x + m, out + whole);
}

// clang never inlines a multiversioned function (calls go through its
// resolver) and refuses noinline beside target_clones; GCC needs it said.
// Likewise each compiler has its own spelling of "no loop-carried
// dependence".
#ifdef __clang__
#define KILN_NOINLINE_CLONES KILN_SIMD_CLONES
#define KILN_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define KILN_NOINLINE_CLONES KILN_SIMD_CLONES __attribute__((noinline))
#define KILN_IVDEP _Pragma("GCC ivdep")
#endif

// out may be exactly in (a donated buffer): each index is read before it is
// written and no other index is touched, so there is no real dependence;
// ivdep vectorizes without the runtime overlap check that would fall back to
// scalar code in that case.
#define KILN_MAP_LOOP(fn)                                              \
  KILN_IVDEP for (size_t i = 0; i < n; ++i) out[i] = std::fn(in[i]);

#define KILN_VECTOR_MATH(Name, fn)                                      \
  KILN_NOINLINE_CLONES void v##fn##_f32_body(const float* in, float* out, \
                                             size_t n) {                  \
    KILN_MAP_LOOP(fn)                                                   \
  }                                                                     \
  KILN_NOINLINE_CLONES void v##fn##_f64_body(const double* in,          \
                                             double* out, size_t n) {   \
    KILN_MAP_LOOP(fn)                                                   \
  }                                                                     \
  void v##fn##_f32(const float* in, float* out, size_t n) {             \
    padded(in, out, n, v##fn##_f32_body);                               \
  }                                                                     \
  void v##fn##_f64(const double* in, double* out, size_t n) {           \
    padded(in, out, n, v##fn##_f64_body);                               \
  }

// One loop per operand pattern, so each is a plain map GCC vectorizes (a
// scalar operand is broadcast, not read with step 0).
#define KILN_MAP2_LOOPS(fn)                                              \
  if (a_one) {                                                           \
    const auto x = a[0];                                                 \
    KILN_IVDEP for (size_t i = 0; i < n; ++i) out[i] =                   \
        std::fn(x, b[i]);                                                \
  } else if (b_one) {                                                    \
    const auto y = b[0];                                                 \
    KILN_IVDEP for (size_t i = 0; i < n; ++i) out[i] =                   \
        std::fn(a[i], y);                                                \
  } else {                                                               \
    KILN_IVDEP for (size_t i = 0; i < n; ++i) out[i] =                   \
        std::fn(a[i], b[i]);                                             \
  }

#define KILN_VECTOR_MATH2(Name, fn)                                       \
  KILN_NOINLINE_CLONES void v##fn##_f32_body(                             \
      const float* a, const float* b, float* out, size_t n, bool a_one,   \
      bool b_one) {                                                       \
    KILN_MAP2_LOOPS(fn)                                                   \
  }                                                                       \
  KILN_NOINLINE_CLONES void v##fn##_f64_body(                             \
      const double* a, const double* b, double* out, size_t n,            \
      bool a_one, bool b_one) {                                           \
    KILN_MAP2_LOOPS(fn)                                                   \
  }                                                                       \
  void v##fn##_f32(const float* a, const float* b, float* out, size_t n,  \
                   bool a_one, bool b_one) {                              \
    padded2(a, b, out, n, a_one, b_one, v##fn##_f32_body);                \
  }                                                                       \
  void v##fn##_f64(const double* a, const double* b, double* out,         \
                   size_t n, bool a_one, bool b_one) {                    \
    padded2(a, b, out, n, a_one, b_one, v##fn##_f64_body);                \
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
    KILN_IVDEP for (size_t i = 0; i < n; ++i) out[i] =                 \
        std::copysign(std::pow(std::abs(a[i]), y), a[i]);              \
  } else {                                                              \
    KILN_IVDEP for (size_t i = 0; i < n; ++i) out[i] =                  \
        std::pow(std::abs(a[i]), y);                                    \
  }
KILN_NOINLINE_CLONES void vpow_integer_f32_body(const float* a, float y,
                                                bool odd, float* out,
                                                size_t n) {
  KILN_POW_INTEGER(float)
}
KILN_NOINLINE_CLONES void vpow_integer_f64_body(const double* a, double y,
                                                bool odd, double* out,
                                                size_t n) {
  KILN_POW_INTEGER(double)
}
#undef KILN_POW_INTEGER
void vpow_integer_f32(const float* a, float y, bool odd, float* out,
                      size_t n) {
  padded(a, out, n, [y, odd](const float* in, float* o, size_t k) {
    vpow_integer_f32_body(in, y, odd, o, k);
  });
}
void vpow_integer_f64(const double* a, double y, bool odd, double* out,
                      size_t n) {
  padded(a, out, n, [y, odd](const double* in, double* o, size_t k) {
    vpow_integer_f64_body(in, y, odd, o, k);
  });
}

// Sigmoid's form (primitives/unary_table.h) around libmvec's exp: exp(-|x|)
// is at most 1, so no inf arises here (this file may assume there is none).
#define KILN_SIGMOID(T)                                                 \
  KILN_IVDEP for (size_t i = 0; i < n; ++i) {                           \
    T x = in[i], t = std::exp(-std::abs(x));                            \
    out[i] = x >= T(0) ? T(1) / (T(1) + t) : t / (T(1) + t);            \
  }
KILN_NOINLINE_CLONES void vsigmoid_f32_body(const float* in, float* out,
                                            size_t n) {
  KILN_SIGMOID(float)
}
KILN_NOINLINE_CLONES void vsigmoid_f64_body(const double* in, double* out,
                                            size_t n) {
  KILN_SIGMOID(double)
}
#undef KILN_SIGMOID
void vsigmoid_f32(const float* in, float* out, size_t n) {
  padded(in, out, n, vsigmoid_f32_body);
}
void vsigmoid_f64(const double* in, double* out, size_t n) {
  padded(in, out, n, vsigmoid_f64_body);
}

} // namespace kiln::detail
