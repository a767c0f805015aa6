// Matrix products, tensor contractions and einsum.
#include "kiln_py.h"

namespace kiln::py {

namespace {

using IntOrInts = std::variant<int, std::vector<int>>;

std::vector<int> as_list(const IntOrInts& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i};
  return std::get<std::vector<int>>(v);
}

} // namespace

void init_ops_matmul(nb::module_& m) {
  m.def(
      "matmul",
      [](ArrayLike a, ArrayLike b, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return matmul(x, y, to_sod(s));
      },
      "a"_a, "b"_a, "stream"_a = nb::none(),
      "Matrix product with NumPy's rules for 1-d and batched operands.");
  m.def(
      "addmm",
      [](ArrayLike c, ArrayLike a, ArrayLike b, float alpha, float beta,
         const StreamArg& s) {
        return addmm(to_array(c), to_array(a), to_array(b), alpha, beta,
                     to_sod(s));
      },
      "c"_a, "a"_a, "b"_a, "alpha"_a = 1.0f, "beta"_a = 1.0f,
      "stream"_a = nb::none(), "alpha * (a @ b) + beta * c.");
  m.def(
      "gather_mm",
      [](ArrayLike a, ArrayLike b, nb::handle lhs_indices,
         nb::handle rhs_indices, bool sorted_indices, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return gather_mm(x, y, opt_array(lhs_indices), opt_array(rhs_indices),
                         sorted_indices, to_sod(s));
      },
      "a"_a, "b"_a, "lhs_indices"_a.none() = nb::none(),
      "rhs_indices"_a.none() = nb::none(), nb::kw_only(),
      "sorted_indices"_a = false, "stream"_a = nb::none(),
      "Matrix products of the batch matrices of a and b picked by flat batch "
      "indices (all of a batch, in order, when None), each read in place.");
  m.def(
      "segmented_mm",
      [](ArrayLike a, ArrayLike b, ArrayLike segments, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return segmented_mm(x, y, to_array(segments), to_sod(s));
      },
      "a"_a, "b"_a, "segments"_a, nb::kw_only(), "stream"_a = nb::none(),
      "For each [start, end) pair in segments (..., 2), a[:, start:end] @ "
      "b[start:end, :].");
  m.def(
      "inner",
      [](ArrayLike a, ArrayLike b, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return inner(x, y, to_sod(s));
      },
      "a"_a, "b"_a, "stream"_a = nb::none(),
      "Sum product over the last axes.");
  m.def(
      "outer",
      [](ArrayLike a, ArrayLike b, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return outer(x, y, to_sod(s));
      },
      "a"_a, "b"_a, "stream"_a = nb::none(),
      "Outer product of the flattened arrays.");
  m.def(
      "tensordot",
      [](ArrayLike a, ArrayLike b, nb::handle axes, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        if (PyLong_Check(axes.ptr())) {
          return tensordot(x, y, cast_arg<int>(axes, "tensordot", "axes"),
                           to_sod(s));
        }
        auto pair = cast_arg<std::pair<IntOrInts, IntOrInts>>(axes, "tensordot",
                                                              "axes");
        return tensordot(x, y, as_list(pair.first), as_list(pair.second),
                         to_sod(s));
      },
      "a"_a, "b"_a, "axes"_a = 2, "stream"_a = nb::none(),
      "Contract the last axes of a with the first of b, or the given "
      "pairs of axes.");
  m.def(
      "einsum",
      [](const std::string& subscripts, nb::args operands, const StreamArg& s) {
        std::vector<array> ops;
        for (nb::handle h : operands) ops.push_back(to_array(h));
        return einsum(subscripts, ops, to_sod(s));
      },
      "subscripts"_a, "operands"_a, "stream"_a = nb::none(),
      "Einstein summation.");
  m.def(
      "einsum_path",
      [](const std::string& subscripts, nb::args operands) {
        std::vector<array> ops;
        for (nb::handle h : operands) ops.push_back(to_array(h));
        auto [path, text] = einsum_path(subscripts, ops);
        nb::list steps;
        for (auto& step : path) {
          nb::list ids;
          for (int i : step) ids.append(i);
          steps.append(nb::tuple(ids));
        }
        return nb::make_tuple(steps, text);
      },
      "subscripts"_a, "operands"_a,
      "The contraction order einsum would use (a list of index tuples) and "
      "a report of its cost.");
  m.def(
      "kron",
      [](ArrayLike a, ArrayLike b, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return kron(x, y, to_sod(s));
      },
      "a"_a, "b"_a, "stream"_a = nb::none(),
      "The Kronecker product of a and b.");
  m.def(
      "vecdot",
      [](ArrayLike a, ArrayLike b, int axis, const StreamArg& s) {
        auto [x, y] = to_arrays(a, b);
        return vecdot(x, y, axis, to_sod(s));
      },
      "a"_a, "b"_a, nb::kw_only(), "axis"_a = -1, "stream"_a = nb::none(),
      "sum(conj(a) * b) along axis.");
}

} // namespace kiln::py
