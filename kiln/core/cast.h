// Value conversion between any two element types, as astype performs it:
// anything -> bool tests for nonzero (a complex value in either part, as
// NumPy and MLX), complex -> real takes the real part, 16-bit floats go
// through float. A float outside an integer type's range converts as x86's
// truncating conversions do (the integer indefinite, INT_MIN, then narrowed),
// which is what NumPy and MLX give there, without C++'s undefined behaviour.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln {

template <typename T>
inline constexpr bool is_half_v =
    std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;

/** float or double v to the integer type To, defined for every v. */
template <typename To, typename F>
inline To float_to_int(F v) {
  constexpr F two31 = F(2147483648.0), two63 = F(9223372036854775808.0);
  if constexpr (sizeof(To) < 4 || (sizeof(To) == 4 && std::is_signed_v<To>)) {
    int32_t r =
        (v >= -two31 && v < two31) ? static_cast<int32_t>(v) : INT32_MIN;
    return static_cast<To>(r);
  } else if constexpr (!std::is_same_v<To, uint64_t>) {
    int64_t r =
        (v >= -two63 && v < two63) ? static_cast<int64_t>(v) : INT64_MIN;
    return static_cast<To>(r);
  } else if (v < two63) {
    return static_cast<uint64_t>(float_to_int<int64_t>(v));
  } else {
    return static_cast<uint64_t>(float_to_int<int64_t>(v - two63)) ^
           (uint64_t{1} << 63);
  }
}

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
    return cast_to<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, double>) {
      return To(v);
    } else {
      return To(static_cast<float>(v));
    }
  } else if constexpr (std::is_floating_point_v<From> &&
                       std::is_integral_v<To>) {
    return float_to_int<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

} // namespace kiln
