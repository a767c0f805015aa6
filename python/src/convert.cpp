// Conversions between Python objects and arrays: scalars, nested lists,
// buffers and NumPy arrays in; nested lists and Python scalars out.
#include <cstring>
#include <limits>

#include "kiln_py.h"

namespace kiln::py {

namespace {

enum class Kind { none, boolean, integer, floating, complex };

[[noreturn]] void type_error(const std::string& msg) {
  throw nb::type_error(("[array] " + msg).c_str());
}
[[noreturn]] void value_error(const std::string& msg) {
  throw nb::value_error(("[array] " + msg).c_str());
}

bool is_sequence(nb::handle obj) {
  return PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr());
}

// NumPy scalars (np.float32(1), np.int64(2), np.bool_(True)) as Python
// scalars; other objects as they are.
nb::object as_builtin_scalar(nb::handle obj) {
  PyObject* p = obj.ptr();
  if (PyBool_Check(p) || PyLong_Check(p) || PyFloat_Check(p) ||
      PyComplex_Check(p)) {
    return nb::borrow(obj);
  }
  if (nb::hasattr(obj, "dtype") && nb::hasattr(obj, "item") &&
      nb::hasattr(obj, "ndim") && !nb::isinstance<array>(obj)) {
    try {
      if (nb::cast<int>(obj.attr("ndim")) == 0) {
        nb::object v = obj.attr("item")();
        PyObject* q = v.ptr();
        if (PyBool_Check(q) || PyLong_Check(q) || PyFloat_Check(q) ||
            PyComplex_Check(q)) {
          return v;
        }
      }
    } catch (nb::python_error&) {
    }
  }
  return nb::object();
}

Kind scalar_kind(nb::handle v) {
  PyObject* p = v.ptr();
  if (PyBool_Check(p)) return Kind::boolean;
  if (PyLong_Check(p)) return Kind::integer;
  if (PyFloat_Check(p)) return Kind::floating;
  if (PyComplex_Check(p)) return Kind::complex;
  return Kind::none;
}

int64_t to_int64(nb::handle v) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow != 0) {
    value_error("the Python int " + py_str(v) + " does not fit in 64 bits.");
  }
  return x;
}

bool fits_int32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() &&
         v <= std::numeric_limits<int32_t>::max();
}

array scalar_to_array(nb::handle v, Kind k, std::optional<Dtype> dtype) {
  switch (k) {
    case Kind::boolean: {
      bool b = PyObject_IsTrue(v.ptr());
      return array(&b, Shape{}, dtype.value_or(bool_));
    }
    case Kind::integer: {
      int64_t x = to_int64(v);
      return array(&x, Shape{}, dtype.value_or(fits_int32(x) ? int32 : int64));
    }
    case Kind::floating: {
      double x = PyFloat_AsDouble(v.ptr());
      return array(&x, Shape{}, dtype.value_or(float32));
    }
    case Kind::complex: {
      complex64_t x(static_cast<float>(PyComplex_RealAsDouble(v.ptr())),
                    static_cast<float>(PyComplex_ImagAsDouble(v.ptr())));
      return array(&x, Shape{}, dtype.value_or(complex64));
    }
    default: type_error("unsupported scalar of type " + py_type_name(v) + ".");
  }
}

// ---- Nested lists -------------------------------------------------------

// A nested list that is not rectangular, in MLX's words, which programs
// may match.
constexpr const char* kNonUniform =
    "Initialization encountered non-uniform length.";
constexpr const char* kExtraDimension =
    "Initialization encountered extra dimension.";
[[noreturn]] void bare_value_error(const char* msg) {
  throw nb::value_error(msg);
}

struct ListScan {
  Shape shape;
  int leaf_depth = -1;
  Kind kind = Kind::none;
  bool big_int = false;
};

void scan_list(nb::handle obj, int depth, ListScan& s) {
  if (is_sequence(obj)) {
    RecursionGuard guard(" while converting a nested list to an array");
    if (s.leaf_depth >= 0 && depth >= s.leaf_depth) {
      bare_value_error(kExtraDimension); // a list where a scalar was
    }
    auto n = static_cast<int32_t>(nb::len(obj));
    if (static_cast<int>(s.shape.size()) == depth) {
      s.shape.push_back(n);
    } else if (s.shape[depth] != n) {
      bare_value_error(kNonUniform);
    }
    if (n == 0) {
      if (s.leaf_depth >= 0 && s.leaf_depth != depth + 1) {
        bare_value_error(kNonUniform);
      }
      return;
    }
    for (nb::handle item : obj) scan_list(item, depth + 1, s);
    return;
  }
  if (s.leaf_depth < 0) {
    s.leaf_depth = depth;
    if (static_cast<int>(s.shape.size()) > depth) {
      bare_value_error(kNonUniform); // a scalar where a list was
    }
  } else if (s.leaf_depth != depth) {
    bare_value_error(kNonUniform);
  }
  nb::object v = as_builtin_scalar(obj);
  if (!v.is_valid()) {
    // ValueError, as MLX raises for a list it cannot read.
    value_error("cannot convert an element of type " + py_type_name(obj) +
                " in a list to an array element.");
  }
  Kind k = scalar_kind(v);
  if (k == Kind::integer && !fits_int32(to_int64(v))) s.big_int = true;
  if (static_cast<int>(k) > static_cast<int>(s.kind)) s.kind = k;
}

template <typename T>
void fill_list(nb::handle obj, std::vector<T>& out) {
  if (is_sequence(obj)) {
    for (nb::handle item : obj) fill_list(item, out);
    return;
  }
  nb::object v = as_builtin_scalar(obj);
  PyObject* p = v.ptr();
  if constexpr (std::is_same_v<T, complex64_t>) {
    out.emplace_back(static_cast<float>(PyComplex_RealAsDouble(p)),
                     static_cast<float>(PyComplex_ImagAsDouble(p)));
  } else if constexpr (std::is_same_v<T, double>) {
    out.push_back(PyFloat_AsDouble(p));
  } else {
    out.push_back(PyBool_Check(p) ? (p == Py_True) : to_int64(v));
  }
}

bool holds_array(nb::handle obj) {
  if (nb::isinstance<array>(obj)) return true;
  if (!is_sequence(obj)) return false;
  for (nb::handle item : obj) {
    if (holds_array(item)) return true;
  }
  return false;
}

// The dtype of a nested list holding arrays, as MLX gives it: the
// promotion of the arrays' dtypes and the Python scalars' own (bool, int32
// or int64, float32, complex64); Python scalars are not weak here.
void list_dtype(nb::handle obj, std::optional<Dtype>& out) {
  Dtype d = bool_;
  if (nb::isinstance<array>(obj)) {
    d = nb::cast<const array&>(obj).dtype();
  } else if (is_sequence(obj)) {
    RecursionGuard guard(" while converting a nested list to an array");
    for (nb::handle item : obj) list_dtype(item, out);
    return;
  } else {
    nb::object v = as_builtin_scalar(obj);
    if (!v.is_valid()) {
      value_error("cannot convert an element of type " + py_type_name(obj) +
                  " in a list to an array element.");
    }
    d = scalar_to_array(v, scalar_kind(v), std::nullopt).dtype();
  }
  out = out ? promote_types(*out, d) : d;
}

// A nested list holding arrays: each array stands for the nested list of
// its shape, so arrays and lists may sit side by side; siblings must agree
// in shape.
array list_of_arrays(nb::handle obj, Dtype dt) {
  if (nb::isinstance<array>(obj)) {
    return astype(nb::cast<const array&>(obj), dt);
  }
  if (!is_sequence(obj)) {
    nb::object v = as_builtin_scalar(obj);
    return scalar_to_array(v, scalar_kind(v), dt);
  }
  RecursionGuard guard(" while converting a nested list to an array");
  std::vector<array> parts;
  for (nb::handle item : obj) parts.push_back(list_of_arrays(item, dt));
  if (parts.empty()) return array(static_cast<const float*>(nullptr), {0}, dt);
  for (auto& p : parts) {
    if (p.shape() != parts[0].shape()) bare_value_error(kNonUniform);
  }
  return stack(parts, 0);
}

array list_to_array(nb::handle obj, std::optional<Dtype> dtype) {
  if (holds_array(obj)) {
    std::optional<Dtype> dt = dtype;
    if (!dt) list_dtype(obj, dt);
    return list_of_arrays(obj, dt.value_or(float32));
  }
  ListScan s;
  scan_list(obj, 0, s);
  switch (s.kind) {
    case Kind::none:
      return array(static_cast<const float*>(nullptr), s.shape,
                   dtype.value_or(float32));
    case Kind::boolean:
    case Kind::integer: {
      std::vector<int64_t> v;
      fill_list(obj, v);
      Dtype d = s.kind == Kind::boolean ? bool_ : (s.big_int ? int64 : int32);
      return array(v.data(), s.shape, dtype.value_or(d));
    }
    case Kind::floating: {
      std::vector<double> v;
      fill_list(obj, v);
      return array(v.data(), s.shape, dtype.value_or(float32));
    }
    case Kind::complex: {
      std::vector<complex64_t> v;
      fill_list(obj, v);
      return array(v.data(), s.shape, dtype.value_or(complex64));
    }
  }
  return array(0);
}

} // namespace

std::string py_str(nb::handle obj) {
  PyObject* s = PyObject_Str(obj.ptr());
  if (!s) throw nb::python_error();
  return nb::cast<std::string>(nb::steal<nb::str>(s));
}

std::string py_type_name(nb::handle obj) {
  nb::handle type(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())));
  return py_str(type.attr("__name__"));
}

bool is_python_scalar(nb::handle obj) {
  if (nb::isinstance<array>(obj)) return false;
  return as_builtin_scalar(obj).is_valid();
}

array to_array(nb::handle obj, std::optional<Dtype> dtype) {
  if (!obj.is_valid() || obj.is_none()) {
    type_error("cannot convert None to an array.");
  }
  if (nb::isinstance<array>(obj)) {
    array a = nb::cast<array>(obj);
    return dtype && *dtype != a.dtype() ? astype(a, *dtype) : a;
  }
  if (is_sequence(obj)) return list_to_array(obj, dtype);
  // A NumPy scalar keeps its dtype (np.int64(3) is int64), as in MLX.
  if (!PyLong_Check(obj.ptr()) && !PyFloat_Check(obj.ptr()) &&
      !PyBool_Check(obj.ptr()) && !PyComplex_Check(obj.ptr()) &&
      nb::hasattr(obj, "dtype") && PyObject_CheckBuffer(obj.ptr())) {
    return buffer_to_array(obj, dtype);
  }
  nb::object v = as_builtin_scalar(obj);
  if (v.is_valid()) return scalar_to_array(v, scalar_kind(v), dtype);
  if (PyUnicode_Check(obj.ptr())) {
    type_error("cannot convert a " + py_type_name(obj) + " to an array.");
  }
  if (PyObject_CheckBuffer(obj.ptr()) || nb::hasattr(obj, "__array__") ||
      nb::hasattr(obj, "__array_interface__")) {
    return buffer_to_array(obj, dtype);
  }
  type_error("cannot convert an object of type " + py_type_name(obj) +
             " to an array.");
}

array to_array_weak(nb::handle obj, Dtype like) {
  if (nb::isinstance<array>(obj)) return nb::cast<array>(obj);
  nb::object v = as_builtin_scalar(obj);
  if (!v.is_valid() || is_sequence(obj)) return to_array(obj);
  switch (scalar_kind(v)) {
    case Kind::boolean: return scalar_to_array(v, Kind::boolean, like);
    case Kind::integer: {
      if (like == bool_) return scalar_to_array(v, Kind::integer, std::nullopt);
      int64_t x = to_int64(v);
      if (is_integral(like)) {
        bool ok = dispatch_type(like, [&](auto tag) {
          using T = KILN_TYPE(tag);
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            if constexpr (std::is_unsigned_v<T>) {
              return x >= 0 &&
                     static_cast<uint64_t>(x) <= std::numeric_limits<T>::max();
            } else {
              return x >= std::numeric_limits<T>::min() &&
                     x <= std::numeric_limits<T>::max();
            }
          }
          return true;
        });
        if (!ok) {
          throw nb::value_error(("Converting " + std::to_string(x) + " to " +
                                 dtype_name(like) +
                                 " would result in overflow.")
                                    .c_str());
        }
      }
      return array(&x, Shape{}, like);
    }
    case Kind::floating:
      return scalar_to_array(v, Kind::floating,
                             is_inexact(like) ? like : float32);
    case Kind::complex: return scalar_to_array(v, Kind::complex, std::nullopt);
    default: return to_array(obj);
  }
}

std::pair<array, array> to_arrays(nb::handle a, nb::handle b) {
  bool a_arr = nb::isinstance<array>(a), b_arr = nb::isinstance<array>(b);
  if (a_arr && !b_arr) {
    array x = nb::cast<array>(a);
    return {x, to_array_weak(b, x.dtype())};
  }
  if (b_arr && !a_arr) {
    array y = nb::cast<array>(b);
    return {to_array_weak(a, y.dtype()), y};
  }
  if (!a_arr && !b_arr) {
    // A scalar beside a list or NumPy array is weak against it as well.
    bool sa = is_python_scalar(a), sb = is_python_scalar(b);
    if (sa && !sb) {
      array y = to_array(b);
      return {to_array_weak(a, y.dtype()), y};
    }
    if (sb && !sa) {
      array x = to_array(a);
      return {x, to_array_weak(b, x.dtype())};
    }
  }
  return {to_array(a), to_array(b)};
}

} // namespace kiln::py
