// eval_cpu of the binary and ternary elementwise primitives.
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/primitives/elementwise.h"

namespace kiln {

using detail::Types;
using detail::unsupported_dtype;

// The evals of the binary table's rows: predicates give bool, the other
// kinds keep their inputs' dtype over the types they allow.
#define KILN_EVAL_all detail::binary_same_type<Types::all>
#define KILN_EVAL_numeric detail::binary_same_type<Types::numeric>
#define KILN_EVAL_inexact detail::binary_same_type<Types::inexact>
#define KILN_EVAL_integral detail::binary_same_type<Types::integral>
#define KILN_EVAL_predicate detail::binary_to_bool
#define KILN_BINARY_EVAL(Name, op, kind, ...)                            \
  void Name::eval_cpu(const std::vector<array>& in, array& out) {    \
    KILN_EVAL_##kind(name(), in[0], in[1], out, detail::Name{});     \
  }
KILN_BINARY_OPS(KILN_BINARY_EVAL)
#undef KILN_BINARY_EVAL
#undef KILN_EVAL_all
#undef KILN_EVAL_numeric
#undef KILN_EVAL_inexact
#undef KILN_EVAL_integral
#undef KILN_EVAL_predicate

void Select::eval_cpu(const std::vector<array>& in, array& out) {
  dispatch_type(out.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    detail::ternary_loop<T>(in[0], in[1], in[2], out, detail::Select{});
  });
}

} // namespace kiln
