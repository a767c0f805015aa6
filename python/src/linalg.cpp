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
  // mlx.core.matrix_norm is the same function as linalg.norm.
  parent.attr("matrix_norm") = m.attr("norm");
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
  m.def(
      "solve_triangular",
      [](ArrayLike a, ArrayLike b, bool upper, const StreamArg& s) {
        return linalg::solve_triangular(to_array(a), to_array(b), upper,
                                        to_sod(s));
      },
      "a"_a, "b"_a, nb::kw_only(), "upper"_a = false, "stream"_a = nb::none(),
      "x with a @ x = b for triangular a (lower, or upper when upper).");
  m.def(
      "tri_inv",
      [](ArrayLike a, bool upper, const StreamArg& s) {
        return linalg::tri_inv(to_array(a), upper, to_sod(s));
      },
      "a"_a, "upper"_a = false, nb::kw_only(), "stream"_a = nb::none(),
      "Inverse of triangular matrices (the other triangle is not read).");
  m.def(
      "cholesky_inv",
      [](ArrayLike a, bool upper, const StreamArg& s) {
        return linalg::cholesky_inv(to_array(a), upper, to_sod(s));
      },
      "a"_a, "upper"_a = false, nb::kw_only(), "stream"_a = nb::none(),
      "Inverse of A from its Cholesky factor (L, or U when upper).");
  m.def(
      "lu_factor",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::lu_factor(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Compact LU factorization: (LU, pivots).");
  m.def(
      "lu",
      [](ArrayLike a, const StreamArg& s) {
        auto r = linalg::lu(to_array(a), to_sod(s));
        return nb::make_tuple(r[0], r[1], r[2]);
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "LU factorization: (p, L, U) with a = L[p] @ U.");
  m.def(
      "det",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::det(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Determinant of square matrices.");
  m.def(
      "slogdet",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::slogdet(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "(sign, log|det|) of square matrices.");
  m.def(
      "eigh",
      [](ArrayLike a, const std::string& uplo, const StreamArg& s) {
        return linalg::eigh(to_array(a), uplo, to_sod(s));
      },
      "a"_a, "UPLO"_a = "L", nb::kw_only(), "stream"_a = nb::none(),
      "(eigenvalues, eigenvectors) of symmetric matrices.");
  m.def(
      "eigvalsh",
      [](ArrayLike a, const std::string& uplo, const StreamArg& s) {
        return linalg::eigvalsh(to_array(a), uplo, to_sod(s));
      },
      "a"_a, "UPLO"_a = "L", nb::kw_only(), "stream"_a = nb::none(),
      "Eigenvalues of symmetric matrices, ascending.");
  m.def(
      "eig",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::eig(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "(eigenvalues, eigenvectors) of square matrices, complex64.");
  m.def(
      "eigvals",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::eigvals(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Eigenvalues of square matrices, complex64.");
  m.def(
      "pinv",
      [](ArrayLike a, const StreamArg& s) {
        return linalg::pinv(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Moore-Penrose pseudo-inverse.");
  m.def(
      "cross",
      [](ArrayLike a, ArrayLike b, int axis, const StreamArg& s) {
        return linalg::cross(to_array(a), to_array(b), axis, to_sod(s));
      },
      "a"_a, "b"_a, "axis"_a = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Cross product of 2- or 3-vectors along axis.");
}

} // namespace kiln::py
