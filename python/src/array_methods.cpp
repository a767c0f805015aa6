// Method forms of the ops (a.sum(axis=0), a.reshape(2, 3), ...): each
// forwards to the module function of the same name, so signatures and
// defaults live in one place.
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
       {"abs",    "all",    "any",      "argmax", "argmin",     "cos",
        "cummax", "cummin", "cumprod",  "cumsum", "exp",        "flatten",
        "log",    "log10",  "log1p",    "log2",   "logsumexp",  "max",
        "mean",   "min",    "moveaxis", "prod",   "reciprocal", "round",
        "rsqrt",  "sin",    "split",    "sqrt",   "square",     "squeeze",
        "std",    "sum",    "swapaxes", "var",    "view"}) {
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
      "mT", [](const array& a) { return swapaxes(a, -1, -2); },
      "The array with its last two axes swapped.");
}

} // namespace kiln::py
