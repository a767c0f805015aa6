// Transformation rules of the elementwise primitives. Each class gives its
// partial derivatives; vjp multiplies them by the cotangent, jvp by the
// tangents, and vmap applies the same primitive to inputs with the mapped
// axis moved first.
#include <cmath>
#include <numbers>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/elementwise.h"
#include "kiln/primitives/shape.h"

namespace kiln {

namespace {

array scalar(double v, const array& like) { return array(v, like.dtype()); }

std::vector<array> zeros_for(const std::vector<array>& inputs, const array& out,
                             const std::vector<int>& argnums) {
  std::vector<array> z;
  for (size_t i = 0; i < argnums.size(); ++i) z.push_back(zeros_like(out));
  return z;
}

// The operands the partials are built from. While a shapeless compile
// traces, an operand the op broadcast (the 2 of x ** 2) is used unbroadcast:
// an expression of constants alone (or of a transformation's own tracers
// for them) is not replayed, so at the traced shape it would stay at it.
// Elementwise partials commute with broadcasting, and they broadcast
// against the cotangent anyway.
std::vector<array> partial_operands(const std::vector<array>& primals) {
  if (!detail::in_shapeless_tracing()) return primals;
  std::vector<array> in = primals;
  for (auto& a : in) {
    auto* b = a.has_primitive() ? dynamic_cast<const Broadcast*>(&a.primitive())
                                : nullptr;
    if (b && b->implicit()) a = a.inputs()[0];
  }
  return in;
}

} // namespace

std::vector<array> Elementwise::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<array>& outputs) {
  auto d = partials(partial_operands(primals), outputs[0], argnums);
  // MLX's convention for complex values: the gradient of a real function
  // of z is d/dx + i d/dy, so a holomorphic op (complex output) sends back
  // the cotangent times the conjugate of its derivative. An op with a real
  // output of a complex input (abs) gives that gradient as its partial.
  bool holomorphic = is_complex(outputs[0].dtype());
  std::vector<array> out;
  for (auto& p : d) {
    out.push_back(multiply(cotangents[0], holomorphic ? conjugate(p) : p));
  }
  return out;
}

std::vector<array> Elementwise::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  // The output is needed by some partials (exp, sqrt, ...): rebuild it.
  array out(primals[0].shape(), out_dtype(primals), shared_from_this(),
            primals);
  auto d = partials(partial_operands(primals), out, argnums);
  // A real output of a complex input (abs) has the gradient g = d/dx +
  // i d/dy as its partial (see vjp): its tangent is Re(conj(g) t).
  bool real_of_complex = !is_complex(out.dtype());
  auto term = [&](const array& t, const array& p) {
    return real_of_complex && is_complex(p.dtype())
               ? real(multiply(t, conjugate(p)))
               : multiply(t, p);
  };
  array t = term(tangents[0], d[0]);
  for (size_t k = 1; k < d.size(); ++k) t = add(t, term(tangents[k], d[k]));
  return {t};
}

std::pair<std::vector<array>, std::vector<int>> Elementwise::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int batch = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) batch = inputs[i].shape(axes[i]);
  }
  std::vector<array> moved;
  Shape shape;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      moved.push_back(moveaxis(inputs[i], axes[i], 0));
      shape = moved.back().shape();
    } else {
      moved.push_back(inputs[i]);
    }
  }
  // An unmapped operand is lined up as the op itself would (an implicit
  // broadcast, aligned right: the batch axis leads), so that under
  // shapeless compile it follows the mapped operands' new shape on replay.
  // One the op had already broadcast implicitly to the traced shape is
  // taken from before that broadcast, which would keep the traced shape.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) continue;
    array x = moved[i];
    while (x.has_primitive()) {
      auto* b = dynamic_cast<const Broadcast*>(&x.primitive());
      if (!b || !b->implicit()) break;
      x = x.inputs()[0];
    }
    moved[i] = detail::broadcast_operand(x, shape);
  }
  (void)batch;
  array out(shape, out_dtype(inputs), shared_from_this(), moved);
  return {{out}, {0}};
}

// ---- partial derivatives ---------------------------------------------------

#define KILN_NO_GRADIENT(Name)                                               \
  std::vector<array> Name::partials(const std::vector<array>& in,            \
                                    const array& out,                        \
                                    const std::vector<int>& argnums) {       \
    return zeros_for(in, in[0], argnums);                                    \
  }
KILN_NO_GRADIENT(Sign)
KILN_NO_GRADIENT(Floor)
KILN_NO_GRADIENT(Ceil)
KILN_NO_GRADIENT(Round)
KILN_NO_GRADIENT(LogicalNot)
KILN_NO_GRADIENT(BitwiseInvert)
KILN_NO_GRADIENT(StopGradient)
KILN_NO_GRADIENT(FloorDivide)
KILN_NO_GRADIENT(Equal)
KILN_NO_GRADIENT(NaNEqual)
KILN_NO_GRADIENT(NotEqual)
KILN_NO_GRADIENT(Less)
KILN_NO_GRADIENT(LessEqual)
KILN_NO_GRADIENT(Greater)
KILN_NO_GRADIENT(GreaterEqual)
KILN_NO_GRADIENT(LogicalAnd)
KILN_NO_GRADIENT(LogicalOr)
KILN_NO_GRADIENT(BitwiseAnd)
KILN_NO_GRADIENT(BitwiseOr)
KILN_NO_GRADIENT(BitwiseXor)
KILN_NO_GRADIENT(LeftShift)
KILN_NO_GRADIENT(RightShift)
#undef KILN_NO_GRADIENT

// Unary partials: one expression in x (the input) and y (the output).
#define KILN_UNARY_PARTIAL(Name, expr)                                       \
  std::vector<array> Name::partials(const std::vector<array>& in,            \
                                    const array& y,                          \
                                    const std::vector<int>&) {               \
    const array& x = in[0];                                                  \
    (void)x;                                                                 \
    (void)y;                                                                 \
    return {expr};                                                           \
  }
KILN_UNARY_PARTIAL(Abs, sign(x))
KILN_UNARY_PARTIAL(Negative, full_like(x, scalar(-1, x)))
KILN_UNARY_PARTIAL(Square, multiply(scalar(2, x), x))
KILN_UNARY_PARTIAL(Exp, y)
KILN_UNARY_PARTIAL(Expm1, add(y, scalar(1, y)))
KILN_UNARY_PARTIAL(Log, reciprocal(x))
KILN_UNARY_PARTIAL(Log1p, reciprocal(add(x, scalar(1, x))))
KILN_UNARY_PARTIAL(Log2, reciprocal(multiply(x, scalar(std::log(2.0), x))))
KILN_UNARY_PARTIAL(Log10, reciprocal(multiply(x, scalar(std::log(10.0), x))))
KILN_UNARY_PARTIAL(Sin, cos(x))
KILN_UNARY_PARTIAL(Cos, negative(sin(x)))
KILN_UNARY_PARTIAL(Tan, add(scalar(1, y), square(y)))
KILN_UNARY_PARTIAL(ArcSin, rsqrt(subtract(scalar(1, x), square(x))))
KILN_UNARY_PARTIAL(ArcCos, negative(rsqrt(subtract(scalar(1, x), square(x)))))
KILN_UNARY_PARTIAL(ArcTan, reciprocal(add(scalar(1, x), square(x))))
KILN_UNARY_PARTIAL(Sinh, cosh(x))
KILN_UNARY_PARTIAL(Cosh, sinh(x))
KILN_UNARY_PARTIAL(Tanh, subtract(scalar(1, y), square(y)))
KILN_UNARY_PARTIAL(ArcSinh, rsqrt(add(square(x), scalar(1, x))))
KILN_UNARY_PARTIAL(ArcCosh, rsqrt(subtract(square(x), scalar(1, x))))
KILN_UNARY_PARTIAL(ArcTanh, reciprocal(subtract(scalar(1, x), square(x))))
KILN_UNARY_PARTIAL(Sqrt, divide(scalar(0.5, y), y))
KILN_UNARY_PARTIAL(Rsqrt, multiply(scalar(-0.5, y), divide(y, x)))
KILN_UNARY_PARTIAL(Sigmoid, multiply(y, subtract(scalar(1, y), y)))
KILN_UNARY_PARTIAL(Erf, multiply(scalar(2 / std::sqrt(std::numbers::pi), x),
                                 exp(negative(square(x)))))
KILN_UNARY_PARTIAL(ErfInv, multiply(scalar(std::sqrt(std::numbers::pi) / 2, y),
                                    exp(square(y))))
#undef KILN_UNARY_PARTIAL

std::vector<array> AsType::partials(const std::vector<array>& in,
                                    const array& y, const std::vector<int>&) {
  // The gradient flows through unchanged; the driver casts it back to the
  // input's dtype.
  return {ones_like(y)};
}

// Binary partials: expressions for d/da and d/db of y = f(a, b).
#define KILN_BINARY_PARTIAL(Name, da, db)                                    \
  std::vector<array> Name::partials(const std::vector<array>& in,            \
                                    const array& y,                          \
                                    const std::vector<int>& argnums) {       \
    const array& a = in[0];                                                  \
    const array& b = in[1];                                                  \
    (void)a;                                                                 \
    (void)b;                                                                 \
    (void)y;                                                                 \
    std::vector<array> out;                                                  \
    for (int i : argnums) out.push_back(i == 0 ? (da) : (db));               \
    return out;                                                              \
  }
KILN_BINARY_PARTIAL(Add, ones_like(a), ones_like(b))
KILN_BINARY_PARTIAL(Subtract, ones_like(a), full_like(b, scalar(-1, b)))
KILN_BINARY_PARTIAL(Multiply, b, a)
KILN_BINARY_PARTIAL(Divide, reciprocal(b), negative(divide(y, b)))
// a mod b = a - b * floor(a / b)
KILN_BINARY_PARTIAL(Remainder, ones_like(a), negative(floor_divide(a, b)))
KILN_BINARY_PARTIAL(Power,
                    multiply(b, power(a, subtract(b, scalar(1, b)))),
                    multiply(y, log(where(greater(a, scalar(0, a)), a,
                                          ones_like(a)))))
// Ties send the whole gradient to the second argument, as in MLX: relu(x)
// = maximum(x, 0) then has gradient 0 at x = 0, as in PyTorch. Complex
// values compare in MLX's order (real part, then imaginary part).
KILN_BINARY_PARTIAL(Maximum, astype(greater(a, b), a.dtype()),
                    astype(less_equal(a, b), b.dtype()))
KILN_BINARY_PARTIAL(Minimum, astype(less(a, b), a.dtype()),
                    astype(greater_equal(a, b), b.dtype()))
KILN_BINARY_PARTIAL(ArcTan2,
                    divide(b, add(square(a), square(b))),
                    negative(divide(a, add(square(a), square(b)))))
KILN_BINARY_PARTIAL(LogAddExp, exp(subtract(a, y)), exp(subtract(b, y)))
#undef KILN_BINARY_PARTIAL

std::vector<array> Select::partials(const std::vector<array>& in,
                                    const array& y,
                                    const std::vector<int>& argnums) {
  const array& c = in[0];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(zeros_like(y));
    } else {
      auto chosen = astype(i == 1 ? c : logical_not(c), y.dtype());
      out.push_back(chosen);
    }
  }
  return out;
}

// ---- real, imag, conjugate -------------------------------------------------
// With the convention MLX uses for complex cotangents (the gradient of a real
// function of z is d/dx + i d/dy), real's cotangent c goes back as c + 0i
// and imag's as 0 + ci; conjugation is its own transpose.

std::vector<array> Real::vjp(const std::vector<array>&,
                             const std::vector<array>& cotangents,
                             const std::vector<int>&,
                             const std::vector<array>&) {
  return {astype(cotangents[0], complex64)};
}

std::vector<array> Real::jvp(const std::vector<array>&,
                             const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {real(tangents[0])};
}

std::vector<array> Imag::vjp(const std::vector<array>&,
                             const std::vector<array>& cotangents,
                             const std::vector<int>&,
                             const std::vector<array>&) {
  return {multiply(array(complex64_t(0.0f, 1.0f)),
                   astype(cotangents[0], complex64))};
}

std::vector<array> Imag::jvp(const std::vector<array>&,
                             const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {imag(tangents[0])};
}

std::vector<array> Conjugate::vjp(const std::vector<array>&,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  return {conjugate(cotangents[0])};
}

std::vector<array> Conjugate::jvp(const std::vector<array>&,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {conjugate(tangents[0])};
}

std::pair<std::vector<array>, std::vector<int>> ComplexPart::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // Elementwise: the batch axis stays where it is.
  Dtype dt = typeid(*this) == typeid(Conjugate) ? complex64 : float32;
  array out(inputs[0].shape(), dt, shared_from_this(), {inputs[0]});
  return {{out}, {axes[0]}};
}

} // namespace kiln
