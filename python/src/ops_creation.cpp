// Ops that create arrays.
#include "kiln_py.h"

namespace kiln::py {

namespace {

bool is_int(nb::handle h) {
  return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr());
}

} // namespace

void init_ops_creation(nb::module_& m) {
  m.def(
      "zeros",
      [](const ShapeArg& shape, std::optional<Dtype> d, const StreamArg& s) {
        return zeros(to_shape(shape), d.value_or(float32), to_sod(s));
      },
      "shape"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "An array of zeros.");
  m.def(
      "ones",
      [](const ShapeArg& shape, std::optional<Dtype> d, const StreamArg& s) {
        return ones(to_shape(shape), d.value_or(float32), to_sod(s));
      },
      "shape"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "An array of ones.");
  m.def(
      "full",
      [](const ShapeArg& shape, nb::handle vals, std::optional<Dtype> d,
         const StreamArg& s) {
        array v = to_array(vals);
        return full(to_shape(shape), v, d.value_or(v.dtype()), to_sod(s));
      },
      "shape"_a, "vals"_a, "dtype"_a = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(), "An array of the shape filled with vals.");
  // Arrays are never uninitialized memory in kiln: empty is zeros.
  m.attr("empty") = m.attr("zeros");
  m.def(
      "zeros_like",
      [](ArrayLike a, const StreamArg& s) {
        return zeros_like(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Zeros of a's shape and dtype.");
  m.def(
      "ones_like",
      [](ArrayLike a, const StreamArg& s) {
        return ones_like(to_array(a), to_sod(s));
      },
      "a"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Ones of a's shape and dtype.");
  m.attr("empty_like") = m.attr("zeros_like");
  m.def(
      "full_like",
      [](ArrayLike a, nb::handle vals, std::optional<Dtype> d,
         const StreamArg& s) {
        array x = to_array(a);
        return full_like(x, to_array_weak(vals, d.value_or(x.dtype())), d,
                         to_sod(s));
      },
      "a"_a, "fill_value"_a, "dtype"_a = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(), "An array like a filled with fill_value.");
  m.def(
      "arange",
      [](nb::handle a, nb::handle b, nb::handle step, std::optional<Dtype> d,
         const StreamArg& s) {
        bool ints = is_int(a) && (b.is_none() || is_int(b)) &&
                    (step.is_none() || is_int(step));
        double start = 0, stop = cast_arg<double>(a, "arange", "start"), st = 1;
        if (!b.is_none())
          start = stop, stop = cast_arg<double>(b, "arange", "stop");
        if (!step.is_none()) st = cast_arg<double>(step, "arange", "step");
        return arange(start, stop, st, d.value_or(ints ? int32 : float32),
                      to_sod(s));
      },
      "start"_a, "stop"_a = nb::none(), "step"_a = nb::none(), nb::kw_only(),
      "dtype"_a = nb::none(), "stream"_a = nb::none(),
      "Values from start (default 0) below stop, step apart: int32 when "
      "every argument is an int, else float32.");
  m.def(
      "linspace",
      [](double start, double stop, int num, std::optional<Dtype> d,
         const StreamArg& s) {
        return linspace(start, stop, num, d.value_or(float32), to_sod(s));
      },
      "start"_a, "stop"_a, "num"_a = 50, "dtype"_a = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(), "num evenly spaced values over [start, stop].");
  m.def(
      "eye",
      [](int n, std::optional<int> mm, int k, std::optional<Dtype> d,
         const StreamArg& s) {
        return eye(n, mm, k, d.value_or(float32), to_sod(s));
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a = nb::none(),
      nb::kw_only(), "stream"_a = nb::none(),
      "Ones on the k-th diagonal of an n x m matrix.");
  m.def(
      "identity",
      [](int n, std::optional<Dtype> d, const StreamArg& s) {
        return identity(n, d.value_or(float32), to_sod(s));
      },
      "n"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "The n x n identity matrix.");
  m.def(
      "tri",
      [](int n, std::optional<int> mm, int k, std::optional<Dtype> d,
         const StreamArg& s) {
        return tri(n, mm, k, d.value_or(float32), to_sod(s));
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a = nb::none(),
      nb::kw_only(), "stream"_a = nb::none(),
      "Ones at and below the k-th diagonal.");
  m.def(
      "tril",
      [](ArrayLike x, int k, const StreamArg& s) {
        return tril(to_array(x), k, to_sod(s));
      },
      "x"_a, "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "The lower triangle of the last two axes.");
  m.def(
      "triu",
      [](ArrayLike x, int k, const StreamArg& s) {
        return triu(to_array(x), k, to_sod(s));
      },
      "x"_a, "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "The upper triangle of the last two axes.");
  m.def(
      "meshgrid",
      [](nb::args arrays, bool sparse, const std::string& indexing,
         const StreamArg& s) {
        std::vector<array> in;
        for (nb::handle h : arrays) in.push_back(to_array(h));
        nb::list items;
        for (auto& g : meshgrid(in, sparse, indexing, to_sod(s))) {
          items.append(nb::cast(g));
        }
        return nb::tuple(items);
      },
      "arrays"_a, "sparse"_a = false, "indexing"_a = "xy",
      "stream"_a = nb::none(),
      "Coordinate grids from 1-d arrays, with Cartesian ('xy') or matrix "
      "('ij') indexing.");
}

} // namespace kiln::py
