// The C math functions the elementwise functors call, one row each: its
// name, its arity and the root of CUDA's names for it (CUDA's float form
// adds an f). The CPU JIT declares them for its kernels (with libmvec's SIMD
// forms where the machine has them) and the device code maps math::name onto
// CUDA's functions; both are generated from this table. A functor that needs
// a function not listed here adds its row.
#pragma once

#define KILN_LIBM_FUNCTIONS(X)                                              \
  X(exp, 1, exp)                                                            \
  X(expm1, 1, expm1)                                                        \
  X(log, 1, log)                                                            \
  X(log1p, 1, log1p)                                                        \
  X(log2, 1, log2)                                                          \
  X(log10, 1, log10)                                                        \
  X(sin, 1, sin)                                                            \
  X(cos, 1, cos)                                                            \
  X(tan, 1, tan)                                                            \
  X(asin, 1, asin)                                                          \
  X(acos, 1, acos)                                                          \
  X(atan, 1, atan)                                                          \
  X(sinh, 1, sinh)                                                          \
  X(cosh, 1, cosh)                                                          \
  X(tanh, 1, tanh)                                                          \
  X(asinh, 1, asinh)                                                        \
  X(acosh, 1, acosh)                                                        \
  X(atanh, 1, atanh)                                                        \
  X(erf, 1, erf)                                                            \
  X(sqrt, 1, sqrt)                                                          \
  X(floor, 1, floor)                                                        \
  X(ceil, 1, ceil)                                                          \
  /* rint rounds halves to even in the default mode, as nearbyint does */   \
  X(nearbyint, 1, rint)                                                     \
  X(fmod, 2, fmod)                                                          \
  X(pow, 2, pow)                                                            \
  X(atan2, 2, atan2)
