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

// The tables' partials: rows with grad `none` have a zero gradient; unary
// rows give one expression in x (the input) and y (the output).
#define KILN_NO_GRADIENT(Name)                                               \
  std::vector<array> Name::partials(const std::vector<array>& in,            \
                                    const array& out,                        \
                                    const std::vector<int>& argnums) {       \
    return zeros_for(in, in[0], argnums);                                    \
  }
#define KILN_UNARY_PARTIAL_none(Name, expr) KILN_NO_GRADIENT(Name)
#define KILN_UNARY_PARTIAL_expr(Name, expr)                                  \
  std::vector<array> Name::partials(const std::vector<array>& in,            \
                                    const array& y,                          \
                                    const std::vector<int>&) {               \
    const array& x = in[0];                                                  \
    (void)x;                                                                 \
    (void)y;                                                                 \
    return {expr};                                                           \
  }
#define KILN_UNARY_PARTIAL(Name, op, kind, vector, aot, grad, expr) \
  KILN_UNARY_PARTIAL_##grad(Name, expr)
KILN_UNARY_OPS(KILN_UNARY_PARTIAL)
#undef KILN_UNARY_PARTIAL
#undef KILN_UNARY_PARTIAL_expr
#undef KILN_UNARY_PARTIAL_none

std::vector<array> AsType::partials(const std::vector<array>& in,
                                    const array& y, const std::vector<int>&) {
  // The gradient flows through unchanged; the driver casts it back to the
  // input's dtype.
  return {ones_like(y)};
}

// Binary rows give expressions for d/da and d/db of y = f(a, b).
#define KILN_BINARY_PARTIAL_none(Name, da, db) KILN_NO_GRADIENT(Name)
#define KILN_BINARY_PARTIAL_expr(Name, da, db)                               \
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
#define KILN_BINARY_PARTIAL(Name, op, kind, vector, aot, grad, da, db) \
  KILN_BINARY_PARTIAL_##grad(Name, da, db)
KILN_BINARY_OPS(KILN_BINARY_PARTIAL)
#undef KILN_BINARY_PARTIAL
#undef KILN_BINARY_PARTIAL_expr
#undef KILN_BINARY_PARTIAL_none
#undef KILN_NO_GRADIENT

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
