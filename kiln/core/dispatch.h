// Runtime dtype -> static type dispatch with generic lambdas:
//   dispatch_type(a.dtype(), [&](auto tag) { using T = KILN_TYPE(tag); ... });
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln {

template <typename T>
struct TypeTag {
  using type = T;
};

#define KILN_TYPE(tag) typename decltype(tag)::type

template <typename F>
decltype(auto) dispatch_type(Dtype dt, F&& f) {
  switch (dt.val) {
    case Dtype::Val::bool_: return f(TypeTag<bool>{});
    case Dtype::Val::uint8: return f(TypeTag<uint8_t>{});
    case Dtype::Val::uint16: return f(TypeTag<uint16_t>{});
    case Dtype::Val::uint32: return f(TypeTag<uint32_t>{});
    case Dtype::Val::uint64: return f(TypeTag<uint64_t>{});
    case Dtype::Val::int8: return f(TypeTag<int8_t>{});
    case Dtype::Val::int16: return f(TypeTag<int16_t>{});
    case Dtype::Val::int32: return f(TypeTag<int32_t>{});
    case Dtype::Val::int64: return f(TypeTag<int64_t>{});
    case Dtype::Val::float16: return f(TypeTag<float16_t>{});
    case Dtype::Val::float32: return f(TypeTag<float>{});
    case Dtype::Val::float64: return f(TypeTag<double>{});
    case Dtype::Val::bfloat16: return f(TypeTag<bfloat16_t>{});
    case Dtype::Val::complex64: return f(TypeTag<complex64_t>{});
  }
  throw std::invalid_argument("[dispatch_type] unknown dtype");
}

/** Dispatch over the real types only; complex raises naming the op (f is
 *  never instantiated for complex64). */
template <typename F>
decltype(auto) dispatch_real_type(Dtype dt, const char* op, F&& f) {
  return dispatch_type(dt, [&](auto tag) -> decltype(f(TypeTag<float>{})) {
    if constexpr (std::is_same_v<KILN_TYPE(tag), complex64_t>) {
      throw std::invalid_argument(
          std::string("[") + op + "] not supported for complex64.");
    } else {
      return f(tag);
    }
  });
}

/** The type kernels compute in: 16-bit floats widen to float. */
template <typename T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<float16_t> {
  using type = float;
};
template <>
struct compute_type<bfloat16_t> {
  using type = float;
};
template <typename T>
using compute_t = typename compute_type<T>::type;

} // namespace kiln
