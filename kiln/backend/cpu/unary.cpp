// eval_cpu of the unary elementwise primitives and AsType.
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/primitives/elementwise.h"

namespace kiln {

using detail::Types;
using detail::unsupported_dtype;

namespace {

// |z| of complex64 is float32; other dtypes keep theirs.
template <typename Op>
void unary_magnitude(const char* name, const array& in, array& out, Op op) {
  if (in.dtype() == complex64) {
    detail::unary_loop<complex64_t, float>(
        in, out, [](complex64_t z) { return std::abs(z); });
  } else {
    detail::unary_same_type(name, in, out, op);
  }
}

template <typename Op>
void unary_predicate(const char*, const array& in, array& out, Op op) {
  dispatch_type(in.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    detail::unary_loop<T, bool>(in, out, op);
  });
}

template <typename Op>
void unary_integral(const char* name, const array& in, array& out, Op op) {
  dispatch_type(in.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_integral_v<T>) {
      detail::unary_loop<T, T>(in, out, op);
    } else {
      unsupported_dtype(name, in.dtype());
    }
  });
}

} // namespace

// The evals of the unary table's rows, by the dtypes each kind takes.
#define KILN_EVAL_all detail::unary_same_type
#define KILN_EVAL_inexact detail::unary_inexact
#define KILN_EVAL_integral unary_integral
#define KILN_EVAL_predicate unary_predicate
#define KILN_EVAL_magnitude unary_magnitude
#define KILN_UNARY_EVAL(Name, op, kind, ...)                             \
  void Name::eval_cpu(const std::vector<array>& in, array& out) {    \
    KILN_EVAL_##kind(name(), in[0], out, detail::Name{});            \
  }
KILN_UNARY_OPS(KILN_UNARY_EVAL)
#undef KILN_UNARY_EVAL
#undef KILN_EVAL_all
#undef KILN_EVAL_inexact
#undef KILN_EVAL_integral
#undef KILN_EVAL_predicate
#undef KILN_EVAL_magnitude

void AsType::eval_cpu(const std::vector<array>& in, array& out) {
  dispatch_type(in[0].dtype(), [&](auto in_tag) {
    using In = KILN_TYPE(in_tag);
    dispatch_type(out.dtype(), [&](auto out_tag) {
      using Out = KILN_TYPE(out_tag);
      detail::unary_loop<In, Out>(in[0], out, [](auto x) { return x; });
    });
  });
}

void Real::eval_cpu(const std::vector<array>& in, array& out) {
  detail::unary_loop<complex64_t, float>(
      in[0], out, [](complex64_t z) { return z.real(); });
}

void Imag::eval_cpu(const std::vector<array>& in, array& out) {
  detail::unary_loop<complex64_t, float>(
      in[0], out, [](complex64_t z) { return z.imag(); });
}

void Conjugate::eval_cpu(const std::vector<array>& in, array& out) {
  detail::unary_loop<complex64_t, complex64_t>(
      in[0], out, [](complex64_t z) { return std::conj(z); });
}

} // namespace kiln
