// The functors with a vector form, from the op tables' `vector` column:
// libmvec's SIMD functions, and nearbyint, one instruction on AVX2 and
// AVX-512 (the baseline clone calls libm). Not floor and ceil: in
// vector_math.cpp's -ffast-math the baseline clone expands them inline
// without signed zeros (ceil(-0.5) gave +0). Included with KILN_VECTOR_MATH
// (unary) and KILN_VECTOR_MATH2 (binary) defined by vector_math.h and
// vector_math.cpp.
#include "kiln/core/preprocessor.h"
#include "kiln/primitives/binary_table.h"

#define KILN_VECTOR_UNARY_ROW(Name, op, kind, vector, ...) \
  KILN_UNLESS_NONE(vector, KILN_VECTOR_MATH(Name, vector))
#define KILN_VECTOR_BINARY_ROW(Name, op, kind, vector, ...) \
  KILN_UNLESS_NONE(vector, KILN_VECTOR_MATH2(Name, vector))
KILN_UNARY_OPS(KILN_VECTOR_UNARY_ROW)
KILN_BINARY_OPS(KILN_VECTOR_BINARY_ROW)

#undef KILN_VECTOR_UNARY_ROW
#undef KILN_VECTOR_BINARY_ROW
