// Method forms of the ops (a.sum(axis=0), a.reshape(2, 3), ...): each
// forwards to the module function of the same name, so signatures and
// defaults live in one place.
#include <cstring>

#include "kiln_py.h"

namespace kiln::py {

namespace {

// reshape(2, 3) and reshape((2, 3)) both work, as in MLX and NumPy.
std::vector<int> varargs_ints(const nb::args& args) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) {
    return cast_arg<std::vector<int>>(args[0], "array", "the shape or axes");
  }
  return cast_arg<std::vector<int>>(args, "array", "the shape or axes");
}

} // namespace

void init_array_methods(nb::module_& m, nb::class_<array>& cls) {
  nb::handle mod = m;
  for (const char* name :
       {"abs",    "all",      "any",         "argmax", "argmin",     "cos",
        "cummax", "cummin",   "cumprod",     "cumsum", "exp",        "flatten",
        "log",    "log10",    "log1p",       "log2",   "logsumexp",  "max",
        "mean",   "min",      "moveaxis",    "prod",   "reciprocal", "round",
        "rsqrt",  "sin",      "split",       "sqrt",   "square",     "squeeze",
        "std",    "sum",      "swapaxes",    "var",    "view",       "conj",
        "diag",   "diagonal", "logcumsumexp"}) {
    std::string n = name;
    cls.def(
        name,
        [mod, n](nb::handle self, nb::args args, nb::kwargs kwargs) {
          return mod.attr(n.c_str())(self, *args, **kwargs);
        },
        "args"_a, "kwargs"_a,
        (std::string("See kiln.core.") + name + ".").c_str());
  }
  cls.def(
      "reshape",
      [](const array& a, nb::args shape, const StreamArg& s) {
        auto v = varargs_ints(shape);
        return reshape(a, Shape(v.begin(), v.end()), to_sod(s));
      },
      "shape"_a, nb::kw_only(), "stream"_a = nb::none(),
      "a with a new shape: reshape(2, 3) or reshape((2, 3)).");
  cls.def(
      "transpose",
      [](const array& a, nb::args axes, const StreamArg& s) {
        if (nb::len(axes) == 0) return transpose(a, to_sod(s));
        return transpose(a, varargs_ints(axes), to_sod(s));
      },
      "axes"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Permute the axes: transpose(1, 0) or transpose((1, 0)).");
  cls.def_prop_ro(
      "real", [](const array& a) { return real(a); },
      "The real part of a complex array.");
  cls.def_prop_ro(
      "imag", [](const array& a) { return imag(a); },
      "The imaginary part of a complex array.");
  cls.def(
      "__array_namespace__",
      [mod](const array&, std::optional<std::string>) { return mod; },
      "api_version"_a = nb::none(), "The kiln.core module.");
  cls.def(
      "__index__",
      [](const array& a) {
        if (a.ndim() != 0 || !(is_integral(a.dtype()) || a.dtype() == bool_)) {
          throw nb::type_error(("Only 0-dimensional integer arrays can be "
                                "converted to an index, got a " +
                                detail::describe(a) + ".")
                                   .c_str());
        }
        return nb::int_(item(a));
      },
      "The value of a 0-d integer array, as a Python int.");
  cls.def(
      "__complex__",
      [](const array& a) {
        return nb::module_::import_("builtins").attr("complex")(item(a));
      },
      "The value of a one-element array, as a Python complex.");
  cls.def(
      "__bytes__",
      [](const array& a) {
        array c = contiguous(a);
        eval_released({c});
        return nb::bytes(c.data<char>(), c.nbytes());
      },
      "The elements' bytes in row-major order.");
  // Python 2 spellings MLX keeps.
  cls.attr("__div__") = cls.attr("__truediv__");
  cls.attr("__rdiv__") = cls.attr("__rtruediv__");
  // Pickling: the row-major bytes, the shape and the dtype's name.
  cls.def("__getstate__", [](const array& a) {
    array c = contiguous(a);
    eval_released({c});
    nb::list shape;
    for (auto d : a.shape()) shape.append(d);
    return nb::make_tuple(nb::bytes(c.data<char>(), c.nbytes()),
                          nb::tuple(shape), dtype_name(a.dtype()));
  });
  cls.def("__setstate__", [](array& self, const nb::tuple& state) {
    auto data = nb::cast<nb::bytes>(state[0]);
    auto dims = nb::cast<std::vector<int>>(state[1]);
    auto name = nb::cast<std::string>(state[2]);
    if (name == "bool") name = "bool_"; // the attribute's spelling
    nb::object dt = nb::module_::import_("kiln.core").attr(name.c_str());
    Dtype dtype = nb::cast<Dtype>(dt);
    auto buf = allocator::malloc(data.size());
    std::memcpy(buf.raw(), data.c_str(), data.size());
    new (&self) array(buf, Shape(dims.begin(), dims.end()), dtype);
  });
  cls.def_prop_ro(
      "mT", [](const array& a) { return swapaxes(a, -1, -2); },
      "The array with its last two axes swapped.");
}

} // namespace kiln::py
