// eval_cpu of the unary elementwise primitives and AsType.
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/primitives/elementwise.h"

namespace kiln {

using detail::Types;
using detail::unsupported_dtype;

// Ops valid for every dtype and keeping it.
#define KILN_UNARY_SAME(Name)                                        \
  void Name::eval_cpu(const std::vector<array>& in, array& out) {    \
    detail::unary_same_type(name(), in[0], out, detail::Name{});             \
  }
KILN_UNARY_SAME(Negative)
KILN_UNARY_SAME(Sign)
KILN_UNARY_SAME(Square)
KILN_UNARY_SAME(StopGradient)
#undef KILN_UNARY_SAME

// Ops on floating (and where meaningful complex) dtypes.
#define KILN_UNARY_INEXACT(Name)                                     \
  void Name::eval_cpu(const std::vector<array>& in, array& out) {    \
    detail::unary_inexact(name(), in[0], out, detail::Name{});               \
  }
KILN_UNARY_INEXACT(Exp)
KILN_UNARY_INEXACT(Expm1)
KILN_UNARY_INEXACT(Log)
KILN_UNARY_INEXACT(Log1p)
KILN_UNARY_INEXACT(Log2)
KILN_UNARY_INEXACT(Log10)
KILN_UNARY_INEXACT(Sin)
KILN_UNARY_INEXACT(Cos)
KILN_UNARY_INEXACT(Tan)
KILN_UNARY_INEXACT(ArcSin)
KILN_UNARY_INEXACT(ArcCos)
KILN_UNARY_INEXACT(ArcTan)
KILN_UNARY_INEXACT(Sinh)
KILN_UNARY_INEXACT(Cosh)
KILN_UNARY_INEXACT(Tanh)
KILN_UNARY_INEXACT(ArcSinh)
KILN_UNARY_INEXACT(ArcCosh)
KILN_UNARY_INEXACT(ArcTanh)
KILN_UNARY_INEXACT(Sqrt)
KILN_UNARY_INEXACT(Rsqrt)
KILN_UNARY_INEXACT(Sigmoid)
KILN_UNARY_INEXACT(Erf)
KILN_UNARY_INEXACT(ErfInv)
KILN_UNARY_INEXACT(Floor)
KILN_UNARY_INEXACT(Ceil)
KILN_UNARY_INEXACT(Round)
#undef KILN_UNARY_INEXACT

void Abs::eval_cpu(const std::vector<array>& in, array& out) {
  if (in[0].dtype() == complex64) {
    detail::unary_loop<complex64_t, float>(
        in[0], out, [](complex64_t z) { return std::abs(z); });
  } else {
    detail::unary_same_type(name(), in[0], out, detail::Abs{});
  }
}

void LogicalNot::eval_cpu(const std::vector<array>& in, array& out) {
  dispatch_type(in[0].dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    unary_loop<T, bool>(in[0], out, detail::LogicalNot{});
  });
}

void BitwiseInvert::eval_cpu(const std::vector<array>& in, array& out) {
  dispatch_type(in[0].dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_integral_v<T>) {
      detail::unary_loop<T, T>(in[0], out, detail::BitwiseInvert{});
    } else {
      unsupported_dtype(name(), in[0].dtype());
    }
  });
}

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
