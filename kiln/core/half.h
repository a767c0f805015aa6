// 16-bit floating-point storage types. Arithmetic promotes to float; the
// conversions from float round to nearest even, as the hardware does.
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "kiln/core/half_bits.h"

namespace kiln {

namespace detail {

struct from_bits_t {};
inline constexpr from_bits_t from_bits{};

} // namespace detail

#define KILN_HALF_TYPE(Name, to_bits, to_float)                         \
  struct Name {                                                         \
    uint16_t bits;                                                      \
    Name() = default;                                                   \
    constexpr Name(uint16_t b, detail::from_bits_t) : bits(b) {}        \
    Name(float f) : bits(detail::to_bits(f)) {}                         \
    Name(double d) : Name(static_cast<float>(d)) {}                     \
    template <typename T,                                               \
              typename = std::enable_if_t<std::is_integral_v<T>>>       \
    Name(T v) : Name(static_cast<float>(v)) {}                          \
    operator float() const { return detail::to_float(bits); }           \
  };                                                                    \
  inline std::ostream& operator<<(std::ostream& os, Name v) {           \
    return os << static_cast<float>(v);                                 \
  }

// One definition for both 16-bit types; they differ only in conversions.
KILN_HALF_TYPE(float16_t, float_to_half_bits, half_bits_to_float)
KILN_HALF_TYPE(bfloat16_t, float_to_bfloat16_bits, bfloat16_bits_to_float)
#undef KILN_HALF_TYPE

} // namespace kiln
