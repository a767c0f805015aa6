// kiln.core.linalg.
#include "kiln_py.h"

namespace kiln::py {

void init_linalg(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("linalg", "Linear algebra.");
  m.def(
      "norm",
      [](ArrayLike a, nb::handle ord, const AxisArg& axis, bool keepdims,
         const StreamArg& s) {
        array x = to_array(a);
        std::optional<std::vector<int>> ax;
        if (axis) ax = axes_of(axis, x.ndim());
        if (ord.is_none()) return linalg::norm(x, ax, keepdims, to_sod(s));
        if (PyUnicode_Check(ord.ptr())) {
          return linalg::norm(x, nb::cast<std::string>(ord), ax, keepdims,
                              to_sod(s));
        }
        return linalg::norm(x, cast_arg<double>(ord, "linalg.norm", "ord"), ax,
                            keepdims, to_sod(s));
      },
      "a"_a, "ord"_a = nb::none(), "axis"_a = nb::none(), "keepdims"_a = false,
      nb::kw_only(), "stream"_a = nb::none(), "Vector or matrix norm.");
  m.def(
      "inv",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::inv(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Inverse of square matrices.");
  m.def(
      "cholesky",
      [](ArrayLike a, bool upper, const StreamArg& s) {
        return linalg::cholesky(to_array(a), upper, to_sod(s));
      },
      "a"_a, "upper"_a = false, nb::kw_only(), "stream"_a = nb::none(),
      "Cholesky factor of symmetric positive definite matrices.");
  m.def(
      "qr",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::qr(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(), "Reduced QR: (Q, R).");
  m.def(
      "svd",
      [](ArrayLike a, bool compute_uv, const StreamArg& s) -> nb::object {
        auto r = linalg::svd(to_array(a), compute_uv, to_sod(s));
        if (!compute_uv) return nb::cast(r[0]);
        return nb::make_tuple(r[0], r[1], r[2]);
      },
      "a"_a, "compute_uv"_a = true, nb::kw_only(), "stream"_a = nb::none(),
      "(U, S, Vt), or S alone when compute_uv is False.");
  m.def(
      "solve",
      [](ArrayLike a, ArrayLike b, const StreamArg& s) {
        return linalg::solve(to_array(a), to_array(b), to_sod(s));
      },
      "a"_a, "b"_a, nb::kw_only(), "stream"_a = nb::none(),
      "x with a @ x = b.");
}

} // namespace kiln::py
