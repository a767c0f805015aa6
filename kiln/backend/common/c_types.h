// The C spelling of element types in the source kiln writes for compilers
// (the CPU JIT's C, users' CUDA kernels). Each writer spells the 16-bit
// floats its own way (bits on the host, CUDA's types on the device).
#pragma once

#include "kiln/core/dtype.h"

namespace kiln::detail {

/** bool, the fixed-width integers, float and double; null for the 16-bit
 *  floats and complex64. */
inline const char* c_scalar_type(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_: return "bool";
    case Dtype::Val::uint8: return "uint8_t";
    case Dtype::Val::uint16: return "uint16_t";
    case Dtype::Val::uint32: return "uint32_t";
    case Dtype::Val::uint64: return "uint64_t";
    case Dtype::Val::int8: return "int8_t";
    case Dtype::Val::int16: return "int16_t";
    case Dtype::Val::int32: return "int32_t";
    case Dtype::Val::int64: return "int64_t";
    case Dtype::Val::float32: return "float";
    case Dtype::Val::float64: return "double";
    default: return nullptr;
  }
}

} // namespace kiln::detail
