// The array class: construction, properties, conversions and operators.
#include <sstream>
#include <string_view>
#include <utility>

#include "kiln_py.h"

namespace kiln::py {

namespace {

nb::tuple shape_tuple(const array& a) {
  nb::list l;
  for (auto d : a.shape()) l.append(d);
  return nb::tuple(l);
}

// Binary operators take what MLX's take: arrays, Python and NumPy scalars
// and NumPy arrays (anything with __array__). Anything else (a list, a
// tuple, a string) raises ValueError naming the operation, as in MLX;
// == and != answer False and True instead.
bool operand(nb::handle o) {
  return nb::isinstance<array>(o) || is_python_scalar(o) ||
         (!PyList_Check(o.ptr()) && !PyTuple_Check(o.ptr()) &&
          nb::hasattr(o, "__array__"));
}

[[noreturn]] void refuse(const char* what, nb::handle other) {
  throw nb::value_error(("Cannot perform " + std::string(what) +
                         " on a " + core_display_name() + ".array and " +
                         py_type_name(other))
                            .c_str());
}

using BinFn = array (*)(const array&, const array&, StreamOrDevice);

template <BinFn F>
auto binop(const char* what) {
  return [what](nb::handle a, nb::handle b) {
    if (!operand(b)) refuse(what, b);
    auto [x, y] = to_arrays(a, b);
    return nb::cast(F(x, y, {}));
  };
}

template <BinFn F>
auto rbinop(const char* what) {
  return [what](nb::handle a, nb::handle b) {
    if (!operand(b)) refuse(what, b);
    auto [x, y] = to_arrays(b, a);
    return nb::cast(F(x, y, {}));
  };
}

template <BinFn F, bool Unequal>
nb::object equality(nb::handle a, nb::handle b) {
  if (!operand(b)) return nb::bool_(Unequal);
  auto [x, y] = to_arrays(a, b);
  return nb::cast(F(x, y, {}));
}

// In-place operators rebind the Python array to the result (as MLX does):
// other Python references to the same object see the new value.
array true_divide(const array& a, const array& b, StreamOrDevice s);

// The result keeps the usual promotion (a += 1.5 makes an int32 array
// float32), as in MLX; true division in place of an integer array raises,
// as MLX's does.
template <BinFn F>
auto ibinop(const char* what) {
  return [what](nb::handle a, nb::handle b) {
    if (!operand(b)) refuse(what, b);
    auto [x, y] = to_arrays(a, b);
    if (F == true_divide && !is_inexact(x.dtype())) {
      throw nb::value_error(
          ("In place division cannot cast to the non-floating point type " +
           dtype_name(x.dtype()) + ".")
              .c_str());
    }
    nb::cast<array&>(a) = F(x, y, {});
    return nb::borrow(a);
  };
}

array true_divide(const array& a, const array& b, StreamOrDevice s) {
  return divide(a, b, s);
}

array and_op(const array& a, const array& b, StreamOrDevice s) {
  return bitwise_and(a, b, s);
}
array or_op(const array& a, const array& b, StreamOrDevice s) {
  return bitwise_or(a, b, s);
}
array xor_op(const array& a, const array& b, StreamOrDevice s) {
  return bitwise_xor(a, b, s);
}
array lshift_op(const array& a, const array& b, StreamOrDevice s) {
  return left_shift(a, b, s);
}
array rshift_op(const array& a, const array& b, StreamOrDevice s) {
  return right_shift(a, b, s);
}

std::string repr(const array& a) {
  eval_released({a});
  std::ostringstream os;
  os << a;
  std::string r = os.str();
  if (a.dtype() == bool_) {
    // Python spells its booleans True and False, as MLX's repr does (the
    // C++ printer keeps C++'s true and false). A bool array's text has no
    // other letters than these words and its "dtype=bool".
    for (auto [from, to] : {std::pair<std::string_view, std::string_view>{
                                "true", "True"},
                            {"false", "False"}}) {
      for (size_t at = r.find(from); at != std::string::npos;
           at = r.find(from, at + to.size())) {
        r.replace(at, from.size(), to);
      }
    }
  }
  return r;
}

// iter(a): the sub-arrays along the first axis, made one at a time.
struct ArrayIterator {
  array a;
  int next;
};

} // namespace

void init_array(nb::module_& m) {
  nb::class_<ArrayIterator>(m, "ArrayIterator",
                            "Iterator over the first axis of an array.")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", [](ArrayIterator& it) {
        if (it.next >= it.a.shape(0)) throw nb::stop_iteration();
        return take(it.a, it.next++, 0);
      });
  auto cls = nb::class_<array>(m, "array", nb::type_slots(array_buffer_slots()),
                               nb::is_weak_referenceable(),
                               "A lazy n-dimensional array.");
  cls.def(
         "__init__",
         [](array* self, nb::handle val, std::optional<Dtype> dtype) {
           new (self) array(to_array(val, dtype));
         },
         "val"_a, "dtype"_a = nb::none(),
         "An array from a scalar, a nested list, a NumPy array or an array.")
      .def_prop_ro("shape", &shape_tuple, "The shape, a tuple of ints.")
      .def_prop_ro("dtype", &array::dtype, "The element type.")
      .def_prop_ro("ndim", &array::ndim, "Number of dimensions.")
      .def_prop_ro("size", &array::size, "Number of elements.")
      .def_prop_ro("nbytes", &array::nbytes, "Bytes of the elements.")
      .def_prop_ro("itemsize", &array::itemsize, "Bytes of one element.")
      .def_prop_ro(
          "T", [](const array& a) { return transpose(a); },
          "The array with its axes reversed.")
      .def(
          "astype",
          [](const array& a, Dtype d, const StreamArg& s) {
            return astype(a, d, to_sod(s));
          },
          "dtype"_a, "stream"_a = nb::none(), "The array cast to dtype.")
      .def("item", &item, "The value of a one-element array, a Python scalar.")
      .def("tolist", &tolist, "The values as nested Python lists.")
      .def("__repr__", &repr)
      .def(
          "__format__",
          [](const array& a, const std::string& spec) -> nb::object {
            // As MLX: a format spec formats a 0-d array's value; without
            // one, any array formats as its repr.
            if (spec.empty()) return nb::str(repr(a).c_str());
            if (a.ndim() != 0) {
              throw nb::type_error(
                  ("unsupported format string passed to " +
                   core_display_name() + ".array.__format__")
                      .c_str());
            }
            PyObject* r = PyObject_Format(item(a).ptr(),
                                          nb::str(spec.c_str()).ptr());
            if (!r) throw nb::python_error();
            return nb::steal(r);
          },
          "spec"_a)
      .def("__len__",
           [](const array& a) {
             if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
             return a.shape(0);
           })
      .def("__iter__",
           [](const array& a) {
             if (a.ndim() == 0)
               throw nb::type_error("iteration over a 0-d array");
             return ArrayIterator{a, 0};
           })
      .def("__bool__",
           [](const array& a) {
             if (a.size() != 1) {
               throw nb::value_error(
                   "The truth value of an array with more than one element is "
                   "ambiguous.");
             }
             return nb::cast<bool>(nb::bool_(item(a)));
           })
      .def("__int__", [](const array& a) { return nb::int_(item(a)); })
      .def("__float__", [](const array& a) { return nb::float_(item(a)); })
      .def("__hash__", [](const array& a) { return a.id(); })
      .def("__copy__", [](const array& a) { return array(a); })
      .def(
          "__deepcopy__", [](const array& a, nb::handle) { return array(a); },
          "memo"_a)
      .def("__add__", binop<add>("addition"))
      .def("__radd__", rbinop<add>("addition"))
      .def("__iadd__", ibinop<add>("addition"))
      .def("__sub__", binop<subtract>("subtraction"))
      .def("__rsub__", rbinop<subtract>("subtraction"))
      .def("__isub__", ibinop<subtract>("subtraction"))
      .def("__mul__", binop<multiply>("multiplication"))
      .def("__rmul__", rbinop<multiply>("multiplication"))
      .def("__imul__", ibinop<multiply>("multiplication"))
      .def("__truediv__", binop<true_divide>("division"))
      .def("__rtruediv__", rbinop<true_divide>("division"))
      .def("__itruediv__", ibinop<true_divide>("division"))
      .def("__floordiv__", binop<floor_divide>("floor division"))
      .def("__rfloordiv__", rbinop<floor_divide>("floor division"))
      .def("__ifloordiv__", ibinop<floor_divide>("floor division"))
      .def("__mod__", binop<remainder>("remainder"))
      .def("__rmod__", rbinop<remainder>("remainder"))
      .def("__imod__", ibinop<remainder>("remainder"))
      .def("__pow__", binop<power>("power"))
      .def("__rpow__", rbinop<power>("power"))
      .def("__ipow__", ibinop<power>("power"))
      .def("__matmul__", binop<matmul>("matrix multiplication"))
      .def("__rmatmul__", rbinop<matmul>("matrix multiplication"))
      .def("__imatmul__", ibinop<matmul>("matrix multiplication"))
      .def("__and__", binop<and_op>("bitwise and"))
      .def("__rand__", rbinop<and_op>("bitwise and"))
      .def("__iand__", ibinop<and_op>("bitwise and"))
      .def("__or__", binop<or_op>("bitwise or"))
      .def("__ror__", rbinop<or_op>("bitwise or"))
      .def("__ior__", ibinop<or_op>("bitwise or"))
      .def("__xor__", binop<xor_op>("bitwise xor"))
      .def("__rxor__", rbinop<xor_op>("bitwise xor"))
      .def("__ixor__", ibinop<xor_op>("bitwise xor"))
      .def("__lshift__", binop<lshift_op>("left shift"))
      .def("__rlshift__", rbinop<lshift_op>("left shift"))
      .def("__ilshift__", ibinop<lshift_op>("left shift"))
      .def("__rshift__", binop<rshift_op>("right shift"))
      .def("__rrshift__", rbinop<rshift_op>("right shift"))
      .def("__irshift__", ibinop<rshift_op>("right shift"))
      .def("__eq__", &equality<equal, false>)
      .def("__ne__", &equality<not_equal, true>)
      .def("__lt__", binop<less>("less than"))
      .def("__le__", binop<less_equal>("less than or equal"))
      .def("__gt__", binop<greater>("greater than"))
      .def("__ge__", binop<greater_equal>("greater than or equal"))
      .def("__neg__", [](const array& a) { return negative(a); })
      .def("__pos__", [](const array& a) { return a; })
      .def("__abs__", [](const array& a) { return abs(a); })
      .def("__invert__", [](const array& a) {
        return a.dtype() == bool_ ? logical_not(a) : bitwise_invert(a);
      });
  init_numpy(cls);
  init_dlpack(m, cls);
  init_indexing(m, cls);
  m.attr("ArrayAt") = cls.attr("_ArrayAt");
  init_array_methods(m, cls);
}

} // namespace kiln::py
