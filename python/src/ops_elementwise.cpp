// Elementwise ops: unary math, binary arithmetic, comparisons, logical and
// bitwise ops, where, clip and closeness tests.
#include "kiln_py.h"

#include <string_view>

#include "kiln/core/preprocessor.h"
#include "kiln/primitives/binary_table.h"

namespace kiln::py {

namespace {

using UnaryFn = array (*)(const array&, StreamOrDevice);
using BinaryFn = array (*)(const array&, const array&, StreamOrDevice);

array logical_xor_(const array& a, const array& b, StreamOrDevice s) {
  return not_equal(astype(a, bool_, s), astype(b, bool_, s), s);
}

} // namespace

void init_ops_elementwise(nb::module_& m) {
  struct U {
    const char* name;
    UnaryFn fn;
  };
  // The unary table's ops (round is bound below, with its decimals), then
  // the others.
  const U unary[] = {
#define KILN_PY_UNARY(Name, op, ...) \
  {#op, [](const array& a, StreamOrDevice s) { return kiln::op(a, s); }},
      KILN_UNARY_OPS(KILN_PY_UNARY)
#undef KILN_PY_UNARY
      {"reciprocal", &reciprocal},
      {"isnan", &kiln::isnan},
      {"isinf", &kiln::isinf},
      {"isposinf", &isposinf},
      {"isneginf", &isneginf},
      {"isfinite", &kiln::isfinite},
      {"trunc", &kiln::trunc},
      {"degrees", &degrees},
      {"radians", &radians},
      {"conjugate", &conjugate},
      {"real", &real},
      {"imag", &imag},
  };
  for (const U& u : unary) {
    if (std::string_view(u.name) == "round") continue;
    m.def(
        u.name,
        [f = u.fn](ArrayLike a, const StreamArg& s) {
          return f(to_array(a), to_sod(s));
        },
        "a"_a, "stream"_a = nb::none(),
        (std::string("Elementwise ") + u.name + " of a.").c_str());
  }
  m.attr("conj") = m.attr("conjugate");
  m.def(
      "nan_to_num",
      [](ArrayLike a, float nan, std::optional<float> posinf,
         std::optional<float> neginf, const StreamArg& s) {
        return nan_to_num(to_array(a), nan, posinf, neginf, to_sod(s));
      },
      "a"_a, "nan"_a = 0, "posinf"_a = nb::none(), "neginf"_a = nb::none(),
      "stream"_a = nb::none(),
      "Replace NaN by nan and infinities by posinf / neginf (by default the "
      "largest finite value of a's dtype and its negative).");
  // MLX's aliases.
  for (auto [alias, name] : {std::pair{"arcsin", "asin"},
                             {"arccos", "acos"},
                             {"arctan", "atan"},
                             {"arcsinh", "asinh"},
                             {"arccosh", "acosh"},
                             {"arctanh", "atanh"}}) {
    m.attr(name) = m.attr(alias);
  }

  struct B {
    const char* name;
    BinaryFn fn;
  };
  // The binary table's ops, then the others.
  const B binary[] = {
#define KILN_PY_BINARY(Name, op, ...)                                  \
  KILN_UNLESS_NONE(op, {#op, [](const array& a, const array& b,         \
                                StreamOrDevice s) {                     \
                          return kiln::op(a, b, s);                     \
                        }}, )
      KILN_BINARY_OPS(KILN_PY_BINARY)
#undef KILN_PY_BINARY
      {"logical_xor", &logical_xor_},
  };
  for (const B& b : binary) {
    m.def(
        b.name,
        [f = b.fn](ArrayLike a, ArrayLike b, const StreamArg& s) {
          auto [x, y] = to_arrays(a, b);
          return f(x, y, to_sod(s));
        },
        "a"_a, "b"_a, "stream"_a = nb::none(),
        (std::string("Elementwise ") + b.name +
         " of a and b, with broadcasting and type promotion.")
            .c_str());
  }
  m.attr("pow") = m.attr("power");
  m.attr("atan2") = m.attr("arctan2");
  m.attr("bitwise_left_shift") = m.attr("left_shift");
  m.attr("bitwise_right_shift") = m.attr("right_shift");

  m.def(
      "divmod",
      [](ArrayLike a, ArrayLike b, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        // A list, as MLX returns.
        return std::vector<array>{floor_divide(x, y, to_sod(s)),
                                  remainder(x, y, to_sod(s))};
      },
      "a"_a, "b"_a, "stream"_a = nb::none(),
      "[floor_divide(a, b), remainder(a, b)].");
  m.def(
      "round",
      [](ArrayLike a, int decimals, const StreamArg& s) {
        return kiln::round(to_array(a), decimals, to_sod(s));
      },
      "a"_a, "decimals"_a = 0, "stream"_a = nb::none(),
      "Round half to even, to the given number of decimals.");
  m.def(
      "positive", [](ArrayLike a, const StreamArg&) { return to_array(a); },
      "a"_a, "stream"_a = nb::none(), "a itself.");
  m.def(
      "astype",
      [](ArrayLike a, Dtype d, const StreamArg& s) {
        return astype(to_array(a), d, to_sod(s));
      },
      "a"_a, "dtype"_a, "stream"_a = nb::none(),
      "a cast to dtype.");
  m.def(
      "asarray",
      [](ArrayLike a, std::optional<Dtype> d, std::optional<bool> copy) {
        // As MLX: copy=False is refused, since an array made here never
        // shares the source's memory by contract (even when it would).
        if (copy && !*copy) {
          throw nb::value_error(
              "[asarray] unable to avoid a copy while creating an array "
              "(copy=False); pass copy=None.");
        }
        array x = to_array(a, d);
        return copy.value_or(false) ? contiguous(x) : x;
      },
      "a"_a, "dtype"_a = nb::none(), nb::kw_only(), "copy"_a = nb::none(),
      "a as an array (an array is not copied unless copy=True; copy=False "
      "raises, as in MLX).");
  m.def(
      "result_type",
      [](nb::args args) {
        // Arrays and dtypes promote strongly; Python scalars are weak.
        std::optional<Dtype> strong;
        for (nb::handle h : args) {
          if (nb::isinstance<Dtype>(h)) {
            Dtype d = nb::cast<Dtype>(h);
            strong = strong ? promote_types(*strong, d) : d;
          } else if (nb::isinstance<array>(h)) {
            Dtype d = nb::cast<array>(h).dtype();
            strong = strong ? promote_types(*strong, d) : d;
          }
        }
        std::optional<Dtype> out = strong;
        for (nb::handle h : args) {
          if (nb::isinstance<Dtype>(h) || nb::isinstance<array>(h)) continue;
          Dtype d = out ? to_array_weak(h, *out).dtype() : to_array(h).dtype();
          out = out ? promote_types(*out, d) : d;
        }
        if (!out) throw nb::value_error("[result_type] no arguments.");
        return *out;
      },
      "arrays_and_dtypes"_a,
      "The dtype the arguments promote to (Python scalars are weak).");
  m.def(
      "where",
      [](ArrayLike c, ArrayLike x, ArrayLike y, const StreamArg& s) {
        auto [xa, ya] = to_arrays(x, y);
        return where(to_array(c), xa, ya, to_sod(s));
      },
      "condition"_a, "x"_a, "y"_a, "stream"_a = nb::none(),
      "x where condition is true, y elsewhere.");
  m.def(
      "clip",
      [](ArrayLike a, nb::handle lo, nb::handle hi, const StreamArg& s) {
        array x = to_array(a);
        if (lo.is_none() && hi.is_none()) {
          throw nb::value_error("[clip] a_min and a_max cannot both be None.");
        }
        std::optional<array> l, h;
        if (!lo.is_none()) l = to_array_weak(lo, x.dtype());
        if (!hi.is_none()) h = to_array_weak(hi, x.dtype());
        return clip(x, l, h, to_sod(s));
      },
      "a"_a, "a_min"_a.none(), "a_max"_a.none(),
      "stream"_a = nb::none(), "a limited to [a_min, a_max].");
  m.def(
      "isclose",
      [](ArrayLike a, ArrayLike b, double rtol, double atol, bool equal_nan,
         const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return isclose(x, y, rtol, atol, equal_nan, to_sod(s));
      },
      "a"_a, "b"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, nb::kw_only(),
      "equal_nan"_a = false, "stream"_a = nb::none(),
      "|a - b| <= atol + rtol * |b|, elementwise.");
  m.def(
      "allclose",
      [](ArrayLike a, ArrayLike b, double rtol, double atol, bool equal_nan,
         const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return allclose(x, y, rtol, atol, equal_nan, to_sod(s));
      },
      "a"_a, "b"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, nb::kw_only(),
      "equal_nan"_a = false, "stream"_a = nb::none(),
      "A bool scalar: all(isclose(a, b)).");
  m.def(
      "array_equal",
      [](ArrayLike a, ArrayLike b, bool equal_nan, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return array_equal(x, y, equal_nan, to_sod(s));
      },
      "a"_a, "b"_a, "equal_nan"_a = false,
      "stream"_a = nb::none(), "True when the shapes and values are equal.");
}

} // namespace kiln::py
