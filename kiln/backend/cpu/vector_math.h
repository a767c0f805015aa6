// Vectorized libm for contiguous float32/float64 runs. A scalar libm call per
// element is slower than NumPy's SIMD loops (../notes: 40 ms vs 12 ms for exp
// over 16M floats); glibc's libmvec gives SIMD versions of the same functions
// with NaN/Inf handled, selected per CPU (SSE2, AVX2, AVX-512) at load time.
#pragma once

#include <cstddef>

#include "kiln/backend/cpu/functors.h"

namespace kiln::detail {

using VecF32 = void (*)(const float*, float*, size_t);
using VecF64 = void (*)(const double*, double*, size_t);

struct VectorFn {
  VecF32 f32;
  VecF64 f64;
};

/** The vectorized form of a functor, or nulls when it has none. */
template <typename Op>
inline constexpr VectorFn vector_fn{nullptr, nullptr};

#define KILN_VECTOR_MATH(Name, fn)                                \
  void v##fn##_f32(const float* in, float* out, size_t n);        \
  void v##fn##_f64(const double* in, double* out, size_t n);      \
  template <>                                                     \
  inline constexpr VectorFn vector_fn<Name>{v##fn##_f32, v##fn##_f64};
#include "kiln/backend/cpu/vector_math_list.h"
#undef KILN_VECTOR_MATH

} // namespace kiln::detail
