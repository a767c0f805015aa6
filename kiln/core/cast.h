// Value conversion between any two element types, as astype performs it:
// anything -> bool tests for nonzero (a complex value in either part, as
// NumPy and MLX), complex -> real takes the real part, 16-bit floats go
// through float.
#pragma once

#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln {

template <typename T>
inline constexpr bool is_half_v =
    std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;

template <typename To, typename From>
inline To cast_to(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool> && is_complex_v<From>) {
    return v.real() != 0.0f || v.imag() != 0.0f;
  } else if constexpr (is_complex_v<From>) {
    return cast_to<To>(v.real());
  } else if constexpr (is_complex_v<To>) {
    return To(cast_to<float>(v), 0.0f);
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_half_v<From>) {
      return static_cast<float>(v) != 0.0f;
    } else {
      return v != From(0);
    }
  } else if constexpr (is_half_v<From>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, double>) {
      return To(v);
    } else {
      return To(static_cast<float>(v));
    }
  } else {
    return static_cast<To>(v);
  }
}

} // namespace kiln
