// The functors with a vector form: (functor, libm name), libmvec's SIMD
// functions, and nearbyint, one instruction on AVX2 and AVX-512 (the
// baseline clone calls libm). Not floor and ceil: in this file's
// -ffast-math the baseline clone expands them inline without signed zeros
// (ceil(-0.5) gave +0). Included with
// KILN_VECTOR_MATH (unary) and KILN_VECTOR_MATH2 (binary) defined by
// vector_math.h and vector_math.cpp.
KILN_VECTOR_MATH(Exp, exp)
KILN_VECTOR_MATH(Expm1, expm1)
KILN_VECTOR_MATH(Log, log)
KILN_VECTOR_MATH(Log1p, log1p)
KILN_VECTOR_MATH(Log2, log2)
KILN_VECTOR_MATH(Log10, log10)
KILN_VECTOR_MATH(Sin, sin)
KILN_VECTOR_MATH(Cos, cos)
KILN_VECTOR_MATH(Tan, tan)
KILN_VECTOR_MATH(ArcSin, asin)
KILN_VECTOR_MATH(ArcCos, acos)
KILN_VECTOR_MATH(ArcTan, atan)
KILN_VECTOR_MATH(Sinh, sinh)
KILN_VECTOR_MATH(Cosh, cosh)
KILN_VECTOR_MATH(Tanh, tanh)
KILN_VECTOR_MATH(ArcSinh, asinh)
KILN_VECTOR_MATH(ArcCosh, acosh)
KILN_VECTOR_MATH(ArcTanh, atanh)
KILN_VECTOR_MATH(Erf, erf)
KILN_VECTOR_MATH(Round, nearbyint)
KILN_VECTOR_MATH2(Power, pow)
KILN_VECTOR_MATH2(ArcTan2, atan2)
