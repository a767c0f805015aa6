#include "kiln/core/dtype.h"

#include <stdexcept>

namespace kiln {

namespace {

constexpr Dtype all_dtypes[num_dtypes] = {
    bool_, uint8, uint16, uint32, uint64, int8, int16,
    int32, int64, float16, float32, float64, bfloat16, complex64};

// Indexed by Dtype::Val. Integers of mixed signedness widen to the next signed
// type; uint64 with a signed integer has no integer home and becomes float32;
// any float wins over integers; float16 with bfloat16 is float32.
constexpr Dtype promotion_table[num_dtypes][num_dtypes] = {
    // clang-format off
  // bool     u8        u16       u32       u64       i8        i16       i32       i64       f16       f32       f64       bf16      c64
  {bool_,   uint8,    uint16,   uint32,   uint64,   int8,     int16,    int32,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // bool
  {uint8,   uint8,    uint16,   uint32,   uint64,   int16,    int16,    int32,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // u8
  {uint16,  uint16,   uint16,   uint32,   uint64,   int32,    int32,    int32,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // u16
  {uint32,  uint32,   uint32,   uint32,   uint64,   int64,    int64,    int64,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // u32
  {uint64,  uint64,   uint64,   uint64,   uint64,   float32,  float32,  float32,  float32,  float16,  float32,  float64,  bfloat16, complex64}, // u64
  {int8,    int16,    int32,    int64,    float32,  int8,     int16,    int32,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // i8
  {int16,   int16,    int32,    int64,    float32,  int16,    int16,    int32,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // i16
  {int32,   int32,    int32,    int64,    float32,  int32,    int32,    int32,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // i32
  {int64,   int64,    int64,    int64,    float32,  int64,    int64,    int64,    int64,    float16,  float32,  float64,  bfloat16, complex64}, // i64
  {float16, float16,  float16,  float16,  float16,  float16,  float16,  float16,  float16,  float16,  float32,  float64,  float32,  complex64}, // f16
  {float32, float32,  float32,  float32,  float32,  float32,  float32,  float32,  float32,  float32,  float32,  float64,  float32,  complex64}, // f32
  {float64, float64,  float64,  float64,  float64,  float64,  float64,  float64,  float64,  float64,  float64,  float64,  float64,  complex64}, // f64
  {bfloat16,bfloat16, bfloat16, bfloat16, bfloat16, bfloat16, bfloat16, bfloat16, bfloat16, float32,  float32,  float64,  bfloat16, complex64}, // bf16
  {complex64,complex64,complex64,complex64,complex64,complex64,complex64,complex64,complex64,complex64,complex64,complex64,complex64,complex64}, // c64
    // clang-format on
};

} // namespace

Dtype dtype_from_index(int i) {
  if (i < 0 || i >= num_dtypes) {
    throw std::invalid_argument("[dtype] index out of range");
  }
  return all_dtypes[i];
}

Dtype promote_types(Dtype a, Dtype b) {
  return promotion_table[static_cast<int>(a.val)][static_cast<int>(b.val)];
}

Dtype::Kind kind(Dtype d) {
  if (d == bool_) return Dtype::Kind::b;
  if (is_unsigned(d)) return Dtype::Kind::u;
  if (is_signed_integer(d)) return Dtype::Kind::i;
  if (d == bfloat16) return Dtype::Kind::V;
  if (is_floating_point(d)) return Dtype::Kind::f;
  return Dtype::Kind::c;
}

namespace {

Dtype::Category category(Dtype d) {
  switch (kind(d)) {
    case Dtype::Kind::b:
      return Dtype::Category::generic;
    case Dtype::Kind::u:
      return Dtype::Category::unsignedinteger;
    case Dtype::Kind::i:
      return Dtype::Category::signedinteger;
    case Dtype::Kind::c:
      return Dtype::Category::complexfloating;
    default:
      return Dtype::Category::floating;
  }
}

} // namespace

bool issubdtype(Dtype a, Dtype b) { return a == b; }

bool issubdtype(Dtype::Category a, Dtype) { (void)a; return false; }

bool issubdtype(Dtype a, Dtype::Category c) {
  if (a == bool_) return c == Dtype::Category::generic;
  return issubdtype(category(a), c);
}

bool issubdtype(Dtype::Category a, Dtype::Category b) {
  using C = Dtype::Category;
  if (a == b || b == C::generic) return true;
  switch (a) {
    case C::complexfloating:
    case C::floating:
      return b == C::inexact || b == C::number;
    case C::inexact:
    case C::integer:
      return b == C::number;
    case C::signedinteger:
    case C::unsignedinteger:
      return b == C::integer || b == C::number;
    default:
      return false;
  }
}

std::string dtype_name(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_: return "bool";
    case Dtype::Val::uint8: return "uint8";
    case Dtype::Val::uint16: return "uint16";
    case Dtype::Val::uint32: return "uint32";
    case Dtype::Val::uint64: return "uint64";
    case Dtype::Val::int8: return "int8";
    case Dtype::Val::int16: return "int16";
    case Dtype::Val::int32: return "int32";
    case Dtype::Val::int64: return "int64";
    case Dtype::Val::float16: return "float16";
    case Dtype::Val::float32: return "float32";
    case Dtype::Val::float64: return "float64";
    case Dtype::Val::bfloat16: return "bfloat16";
    case Dtype::Val::complex64: return "complex64";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, Dtype d) {
  return os << dtype_name(d);
}

} // namespace kiln
