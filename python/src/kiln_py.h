// Shared pieces of the Python bindings: conversions between Python objects
// and arrays, argument types with MLX's Python forms, and each family's init.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/ops/utils.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::py {

/** An argument that becomes an array (an array, a Python scalar, a nested
 *  list, a NumPy array); a distinct type only so that signatures say so. */
struct ArrayLike : nb::object {
  using nb::object::object;
};

} // namespace kiln::py

namespace nanobind::detail {
template <>
struct type_caster<kiln::py::ArrayLike> {
  NB_TYPE_CASTER(kiln::py::ArrayLike, const_name("array | scalar | list"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    value = kiln::py::ArrayLike(src, borrow_t{});
    return true;
  }
  static handle from_cpp(const kiln::py::ArrayLike& v, rv_policy,
                         cleanup_list*) noexcept {
    return v.inc_ref();
  }
};
} // namespace nanobind::detail

namespace kiln::py {

/** A stream that each thread creates for itself on first use (MLX's
 *  ThreadLocalStream); usable wherever a stream is. */
struct ThreadLocalStream {
  Device device;
  int id;
  /** This thread's stream for it. */
  Stream get() const;
};
/** Forget the thread-local streams this thread created. */
void clear_thread_local_streams();

/** The stream= keyword: None, a Stream, a ThreadLocalStream or a Device. */
using StreamArg =
    std::optional<std::variant<Stream, ThreadLocalStream, Device>>;
StreamOrDevice to_sod(const StreamArg& s);

/** axis= in MLX's Python form: None, an int or a sequence of ints. */
using AxisArg = std::optional<std::variant<int, std::vector<int>>>;
/** The axes an AxisArg names; all axes of an ndim array when None. */
std::vector<int> axes_of(const AxisArg& axis, int ndim);

/** A shape argument: an int or a sequence of ints, taken as 64-bit so that
 *  to_shape can name a size that does not fit (OverflowError). */
using ShapeArg = std::variant<int64_t, std::vector<int64_t>>;
Shape to_shape(const ShapeArg& s);

/** An array from any array-like: an array, a Python scalar, a nested
 *  list or tuple, a NumPy array or scalar, or an object with a buffer or
 *  __array__. dtype, when given, is the result's dtype. */
array to_array(nb::handle obj, std::optional<Dtype> dtype = std::nullopt);

/** An array from a NumPy array, NumPy scalar or buffer (copied). */
array buffer_to_array(nb::handle obj, std::optional<Dtype> dtype);

/** obj as an array next to an array of dtype `like`: Python scalars are
 *  weakly typed (an int takes like's dtype, a float takes it when it is
 *  inexact); anything else converts as to_array. */
array to_array_weak(nb::handle obj, Dtype like);

/** Both operands of a binary op, with weak typing of Python scalars. */
std::pair<array, array> to_arrays(nb::handle a, nb::handle b);
/** The name this module goes by in what it prints: "kiln.core", or
 *  "mlx.core" under the mlx alias (kiln.mlx), as MLX programs expect. */
inline std::string& core_display_name() {
  static std::string name = "kiln.core";
  return name;
}

/** Counts one level of a C++ walk over a Python structure against Python's
 *  recursion limit, so a structure nested past it raises RecursionError
 *  instead of overflowing the C stack. */
struct RecursionGuard {
  explicit RecursionGuard(const char* where) {
    if (Py_EnterRecursiveCall(where)) throw nb::python_error();
  }
  ~RecursionGuard() { Py_LeaveRecursiveCall(); }
  RecursionGuard(const RecursionGuard&) = delete;
  RecursionGuard& operator=(const RecursionGuard&) = delete;
};

/** to_array(h), or nothing for None. */
inline std::optional<array> opt_array(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_array(h);
}

/** True for Python bool/int/float/complex and NumPy scalars. */
bool is_python_scalar(nb::handle obj);

/** Nested lists of Python scalars; item() of one element. */
nb::object tolist(array a);
nb::object item(array a);

/** Evaluate without holding the GIL (kernels never call Python, and a
 *  background evaluation may need the GIL to drop a Python callback). */
void eval_released(std::vector<array> arrays);

/** str(obj), as Python spells it. */
std::string py_str(nb::handle obj);

/** Python's type name of obj, for messages. */
std::string py_type_name(nb::handle obj);

/** nb::cast<T>(h), raising TypeError naming the op and the argument. */
template <typename T>
T cast_arg(nb::handle h, const char* op, const char* what) {
  try {
    return nb::cast<T>(h);
  } catch (const nb::cast_error&) {
    throw nb::type_error((std::string("[") + op + "] " + what +
                          " has the wrong type: got " + py_type_name(h) + ".")
                             .c_str());
  }
}

void init_dtype(nb::module_& m);
void init_device(nb::module_& m);
void init_memory(nb::module_& m);
void init_array(nb::module_& m);
void init_array_methods(nb::module_& m, nb::class_<array>& cls);
void init_indexing(nb::module_& m, nb::class_<array>& cls);
void init_numpy(nb::class_<array>& cls);
void init_dlpack(nb::module_& m, nb::class_<array>& cls);
void init_printing(nb::module_& m);
/** Type slots of the array class: the buffer protocol. */
PyType_Slot* array_buffer_slots();
void init_ops_elementwise(nb::module_& m);
void init_ops_reduction(nb::module_& m);
void init_ops_shape(nb::module_& m);
void init_ops_creation(nb::module_& m);
void init_ops_indexing(nb::module_& m);
void init_ops_matmul(nb::module_& m);
void init_ops_quantized(nb::module_& m);
void init_ops_conv(nb::module_& m);
void init_ops_signal(nb::module_& m);
void init_fft(nb::module_& m);
void init_transforms(nb::module_& m);
void init_trees(nb::module_& m);
void init_random(nb::module_& m);
void init_linalg(nb::module_& m);
void init_fast(nb::module_& m);
void init_io(nb::module_& m);
void init_export(nb::module_& m);
void init_distributed(nb::module_& m);

/** Indexing, shared by __getitem__, __setitem__ and .at[]. */
array get_item(const array& a, nb::handle index);
array set_item(const array& a, nb::handle index, nb::handle value);
/** a with op(a[index], value) written back; op is one of "add",
 *  "subtract", "multiply", "divide", "maximum", "minimum". */
array update_item(const array& a, nb::handle index, nb::handle value,
                  const std::string& op);

} // namespace kiln::py
