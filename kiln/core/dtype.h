// Element types, their categories and MLX's promotion rules.
#pragma once

#include <complex>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "kiln/core/half.h"

namespace kiln {

using complex64_t = std::complex<float>;

struct Dtype {
  enum class Val : uint8_t {
    bool_,
    uint8,
    uint16,
    uint32,
    uint64,
    int8,
    int16,
    int32,
    int64,
    float16,
    float32,
    float64,
    bfloat16,
    complex64,
  };
  // NumPy's kind characters: b(ool), u(nsigned), i(nteger), f(loat),
  // c(omplex), V (bfloat16, which NumPy has no name for).
  enum class Kind : char { b, u, i, f, c, V };
  // Abstract categories for issubdtype, as NumPy and MLX define them.
  enum class Category {
    complexfloating,
    floating,
    inexact,
    signedinteger,
    unsignedinteger,
    integer,
    number,
    generic
  };

  Val val;
  uint8_t size;

  constexpr Dtype(Val v, uint8_t s) : val(v), size(s) {}
  constexpr operator Val() const { return val; }
};

inline constexpr Dtype bool_{Dtype::Val::bool_, 1};
inline constexpr Dtype uint8{Dtype::Val::uint8, 1};
inline constexpr Dtype uint16{Dtype::Val::uint16, 2};
inline constexpr Dtype uint32{Dtype::Val::uint32, 4};
inline constexpr Dtype uint64{Dtype::Val::uint64, 8};
inline constexpr Dtype int8{Dtype::Val::int8, 1};
inline constexpr Dtype int16{Dtype::Val::int16, 2};
inline constexpr Dtype int32{Dtype::Val::int32, 4};
inline constexpr Dtype int64{Dtype::Val::int64, 8};
inline constexpr Dtype float16{Dtype::Val::float16, 2};
inline constexpr Dtype float32{Dtype::Val::float32, 4};
inline constexpr Dtype float64{Dtype::Val::float64, 8};
inline constexpr Dtype bfloat16{Dtype::Val::bfloat16, 2};
inline constexpr Dtype complex64{Dtype::Val::complex64, 8};

inline constexpr Dtype::Category complexfloating =
    Dtype::Category::complexfloating;
inline constexpr Dtype::Category floating = Dtype::Category::floating;
inline constexpr Dtype::Category inexact = Dtype::Category::inexact;
inline constexpr Dtype::Category signedinteger = Dtype::Category::signedinteger;
inline constexpr Dtype::Category unsignedinteger =
    Dtype::Category::unsignedinteger;
inline constexpr Dtype::Category integer = Dtype::Category::integer;
inline constexpr Dtype::Category number = Dtype::Category::number;
inline constexpr Dtype::Category generic = Dtype::Category::generic;

inline constexpr int num_dtypes = 14;
Dtype dtype_from_index(int i);

Dtype::Kind kind(Dtype d);
bool issubdtype(Dtype a, Dtype b);
bool issubdtype(Dtype a, Dtype::Category c);
bool issubdtype(Dtype::Category a, Dtype b);
bool issubdtype(Dtype::Category a, Dtype::Category b);

inline bool is_floating_point(Dtype d) {
  return d == float16 || d == bfloat16 || d == float32 || d == float64;
}
inline bool is_complex(Dtype d) { return d == complex64; }
inline bool is_inexact(Dtype d) {
  return is_floating_point(d) || is_complex(d);
}
inline bool is_unsigned(Dtype d) {
  return d == uint8 || d == uint16 || d == uint32 || d == uint64;
}
inline bool is_signed_integer(Dtype d) {
  return d == int8 || d == int16 || d == int32 || d == int64;
}
inline bool is_integral(Dtype d) {
  return is_unsigned(d) || is_signed_integer(d);
}

/** The dtype two arrays of dtypes a and b promote to (MLX's table). */
Dtype promote_types(Dtype a, Dtype b);

/** Name as MLX prints it: "float32", "bool", ... */
std::string dtype_name(Dtype d);
std::ostream& operator<<(std::ostream& os, Dtype d);

template <typename T>
struct TypeToDtype;

#define KILN_TYPE_TO_DTYPE(T, D) \
  template <>                    \
  struct TypeToDtype<T> {        \
    static constexpr Dtype value = D; \
  };
KILN_TYPE_TO_DTYPE(bool, bool_)
KILN_TYPE_TO_DTYPE(uint8_t, uint8)
KILN_TYPE_TO_DTYPE(uint16_t, uint16)
KILN_TYPE_TO_DTYPE(uint32_t, uint32)
KILN_TYPE_TO_DTYPE(uint64_t, uint64)
KILN_TYPE_TO_DTYPE(int8_t, int8)
KILN_TYPE_TO_DTYPE(int16_t, int16)
KILN_TYPE_TO_DTYPE(int32_t, int32)
KILN_TYPE_TO_DTYPE(int64_t, int64)
KILN_TYPE_TO_DTYPE(float16_t, float16)
KILN_TYPE_TO_DTYPE(bfloat16_t, bfloat16)
KILN_TYPE_TO_DTYPE(float, float32)
KILN_TYPE_TO_DTYPE(double, float64)
KILN_TYPE_TO_DTYPE(complex64_t, complex64)
#undef KILN_TYPE_TO_DTYPE

template <typename T>
inline constexpr Dtype dtype_of = TypeToDtype<T>::value;

/** Default dtype of an array built from C++ values of type T: as MLX,
 *  double makes float32 (ask for float64 explicitly). */
template <typename T>
inline constexpr Dtype default_dtype_of =
    std::is_same_v<T, double> ? float32 : dtype_of<T>;

} // namespace kiln
