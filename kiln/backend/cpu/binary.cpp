// eval_cpu of the binary and ternary elementwise primitives.
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/primitives/elementwise.h"

namespace kiln {

using detail::Types;
using detail::unsupported_dtype;

#define KILN_BINARY(Name, allowed)                                         \
  void Name::eval_cpu(const std::vector<array>& in, array& out) {          \
    detail::binary_same_type<Types::allowed>(name(), in[0], in[1], out,            \
                                     detail::Name{});                      \
  }
KILN_BINARY(Add, all)
KILN_BINARY(Subtract, numeric)
KILN_BINARY(Multiply, all)
KILN_BINARY(Divide, numeric)
KILN_BINARY(FloorDivide, numeric)
KILN_BINARY(Remainder, numeric)
KILN_BINARY(Power, all)
KILN_BINARY(Maximum, all)
KILN_BINARY(Minimum, all)
KILN_BINARY(ArcTan2, inexact)
KILN_BINARY(LogAddExp, inexact)
KILN_BINARY(BitwiseAnd, integral)
KILN_BINARY(BitwiseOr, integral)
KILN_BINARY(BitwiseXor, integral)
KILN_BINARY(LeftShift, integral)
KILN_BINARY(RightShift, integral)
#undef KILN_BINARY

#define KILN_COMPARE(Name)                                               \
  void Name::eval_cpu(const std::vector<array>& in, array& out) {        \
    detail::binary_to_bool(name(), in[0], in[1], out, detail::Name{});           \
  }
KILN_COMPARE(Equal)
KILN_COMPARE(NaNEqual)
KILN_COMPARE(NotEqual)
KILN_COMPARE(Less)
KILN_COMPARE(LessEqual)
KILN_COMPARE(Greater)
KILN_COMPARE(GreaterEqual)
KILN_COMPARE(LogicalAnd)
KILN_COMPARE(LogicalOr)
#undef KILN_COMPARE

void Select::eval_cpu(const std::vector<array>& in, array& out) {
  dispatch_type(out.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    detail::ternary_loop<T>(in[0], in[1], in[2], out, detail::Select{});
  });
}

} // namespace kiln
