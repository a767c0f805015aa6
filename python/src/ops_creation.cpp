// Ops that create arrays.
#include "kiln_py.h"

namespace kiln::py {

namespace {

bool is_int(nb::handle h) {
  return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr());
}

// arange with MLX's inferred dtype: float32 when any argument is a float,
// else int32, or int64 when a value does not fit in int32.
array arange_of(nb::handle a, nb::handle b, nb::handle step,
                std::optional<Dtype> d, const StreamArg& s) {
  bool ints = true, wide = false;
  for (nb::handle h : {a, b, step}) {
    if (h.is_none()) continue;
    if (!is_int(h)) {
      ints = false;
      continue;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow || v > INT32_MAX || v < INT32_MIN) wide = true;
  }
  double start = a.is_none() ? 0.0 : cast_arg<double>(a, "arange", "start");
  double stop = cast_arg<double>(b, "arange", "stop");
  double st = step.is_none() ? 1.0 : cast_arg<double>(step, "arange", "step");
  Dtype inferred = ints ? (wide ? int64 : int32) : float32;
  return arange(start, stop, st, d.value_or(inferred), to_sod(s));
}

} // namespace

void init_ops_creation(nb::module_& m) {
  m.def(
      "zeros",
      [](const ShapeArg& shape, std::optional<Dtype> d, const StreamArg& s) {
        return zeros(to_shape(shape), d.value_or(float32), to_sod(s));
      },
      "shape"_a, "dtype"_a.none() = float32, "stream"_a = nb::none(),
      "An array of zeros.");
  m.def(
      "ones",
      [](const ShapeArg& shape, std::optional<Dtype> d, const StreamArg& s) {
        return ones(to_shape(shape), d.value_or(float32), to_sod(s));
      },
      "shape"_a, "dtype"_a.none() = float32, "stream"_a = nb::none(),
      "An array of ones.");
  m.def(
      "full",
      [](const ShapeArg& shape, nb::handle vals, std::optional<Dtype> d,
         const StreamArg& s) {
        // A Python float read in the requested dtype: float64 keeps its
        // double value.
        array v = d ? to_array(vals, d) : to_array(vals);
        return full(to_shape(shape), v, d.value_or(v.dtype()), to_sod(s));
      },
      "shape"_a, "vals"_a, "dtype"_a = nb::none(),
      "stream"_a = nb::none(), "An array of the shape filled with vals.");
  // Arrays are never uninitialized memory in kiln: empty is zeros.
  m.attr("empty") = m.attr("zeros");
  m.def(
      "zeros_like",
      [](ArrayLike a, std::optional<Dtype> d, const StreamArg& s) {
        array x = to_array(a);
        return zeros_like(d ? astype(x, *d, to_sod(s)) : x, to_sod(s));
      },
      "a"_a, "dtype"_a = nb::none(), "stream"_a = nb::none(),
      "Zeros of a's shape and dtype.");
  m.def(
      "ones_like",
      [](ArrayLike a, std::optional<Dtype> d, const StreamArg& s) {
        array x = to_array(a);
        return ones_like(d ? astype(x, *d, to_sod(s)) : x, to_sod(s));
      },
      "a"_a, "dtype"_a = nb::none(), "stream"_a = nb::none(),
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
      "a"_a, "vals"_a, "dtype"_a = nb::none(),
      "stream"_a = nb::none(), "An array like a filled with vals.");
  // Two overloads, as MLX: arange(start, stop[, step]) (stop may be None:
  // then start is the stop) and arange(stop[, step]); arange(start=...)
  // without a stop matches neither.
  const char* doc =
      "Values from start (default 0) below stop, step apart: int32 when "
      "every argument is an int (int64 when one does not fit in int32), "
      "else float32. An integer dtype steps by dtype(start + step) - "
      "dtype(start), as NumPy.";
  m.def(
      "arange",
      [](nb::handle a, nb::handle b, nb::handle step, std::optional<Dtype> d,
         const StreamArg& s) {
        if (b.is_none()) return arange_of(nb::none(), a, step, d, s);
        return arange_of(a, b, step, d, s);
      },
      "start"_a, "stop"_a.none(), "step"_a = nb::none(),
      "dtype"_a = nb::none(), "stream"_a = nb::none(), doc);
  m.def(
      "arange",
      [](nb::handle b, nb::handle step, std::optional<Dtype> d,
         const StreamArg& s) { return arange_of(nb::none(), b, step, d, s); },
      "stop"_a, "step"_a = nb::none(), "dtype"_a = nb::none(),
      "stream"_a = nb::none(), doc);
  m.def(
      "linspace",
      [](double start, double stop, int num, bool endpoint,
         std::optional<Dtype> d, const StreamArg& s) {
        // Without the endpoint: num values over [start, stop), step apart.
        if (!endpoint && num > 0) stop = start + (stop - start) * (num - 1) / num;
        return linspace(start, stop, num, d.value_or(float32), to_sod(s));
      },
      "start"_a, "stop"_a, "num"_a = 50, "endpoint"_a = true,
      "dtype"_a.none() = float32, "stream"_a = nb::none(),
      "num evenly spaced values over [start, stop] ([start, stop) without "
      "the endpoint).");
  m.def(
      "eye",
      [](int n, std::optional<int> mm, int k, std::optional<Dtype> d,
         const StreamArg& s) {
        return eye(n, mm, k, d.value_or(float32), to_sod(s));
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a.none() = float32,
      "stream"_a = nb::none(),
      "Ones on the k-th diagonal of an n x m matrix.");
  m.def(
      "identity",
      [](int n, std::optional<Dtype> d, const StreamArg& s) {
        return identity(n, d.value_or(float32), to_sod(s));
      },
      "n"_a, "dtype"_a.none() = float32, "stream"_a = nb::none(),
      "The n x n identity matrix.");
  m.def(
      "tri",
      [](int n, std::optional<int> mm, int k, std::optional<Dtype> d,
         const StreamArg& s) {
        return tri(n, mm, k, d.value_or(float32), to_sod(s));
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a = nb::none(),
      "stream"_a = nb::none(),
      "Ones at and below the k-th diagonal.");
  m.def(
      "tril",
      [](ArrayLike x, int k, const StreamArg& s) {
        return tril(to_array(x), k, to_sod(s));
      },
      "x"_a, "k"_a = 0, "stream"_a = nb::none(),
      "The lower triangle of the last two axes.");
  m.def(
      "triu",
      [](ArrayLike x, int k, const StreamArg& s) {
        return triu(to_array(x), k, to_sod(s));
      },
      "x"_a, "k"_a = 0, "stream"_a = nb::none(),
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
