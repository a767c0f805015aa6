// NumPy interop: arrays from NumPy arrays and buffers; the buffer protocol
// (zero-copy for any strided layout of an evaluated array) and __array__
// built on it.
#include <cstring>
#include <limits>

#include "kiln_py.h"

namespace kiln::py {

namespace {

[[noreturn]] void type_error(const std::string& msg) {
  throw nb::type_error(("[array] " + msg).c_str());
}
[[noreturn]] void value_error(const std::string& msg) {
  throw nb::value_error(("[array] " + msg).c_str());
}

// The dtype a PEP 3118 format names; complex128 maps to a marker handled
// by the caller.
std::optional<Dtype> format_dtype(const char* fmt, Py_ssize_t itemsize,
                                  bool& complex128) {
  complex128 = false;
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') ++fmt;
  if (*fmt == '>' || *fmt == '!') return std::nullopt;
  std::string f(fmt);
  if (f == "?") return bool_;
  if (f == "e") return float16;
  if (f == "f") return float32;
  if (f == "d") return float64;
  if (f == "Zf") return complex64;
  if (f == "Zd") {
    complex128 = true;
    return complex64;
  }
  if (f.size() != 1) return std::nullopt;
  bool is_signed = std::islower(static_cast<unsigned char>(f[0]));
  if (std::string("bBhHiIlLqQnN").find(f[0]) == std::string::npos) {
    return std::nullopt;
  }
  switch (itemsize) {
    case 1: return is_signed ? int8 : uint8;
    case 2: return is_signed ? int16 : uint16;
    case 4: return is_signed ? int32 : uint32;
    case 8: return is_signed ? int64 : uint64;
  }
  return std::nullopt;
}

} // namespace

array buffer_to_array(nb::handle obj, std::optional<Dtype> dtype) {
  nb::module_ np = nb::module_::import_("numpy");
  // asarray keeps 0-d arrays and NumPy scalars 0-d (ascontiguousarray
  // would make them 1-d).
  // bytes and bytearray are buffers of uint8 (NumPy would read them as
  // one fixed-width string).
  nb::object arr =
      PyBytes_Check(obj.ptr()) || PyByteArray_Check(obj.ptr())
          ? np.attr("frombuffer")(obj, "dtype"_a = "uint8")
          : np.attr("asarray")(obj, "order"_a = "C");
  // Extended precision has no kiln dtype: go through float64 / complex128.
  std::string kind = nb::cast<std::string>(arr.attr("dtype").attr("kind"));
  if (std::string("biufc").find(kind) == std::string::npos) {
    type_error("cannot convert an object of type " + py_type_name(obj) +
               " with NumPy dtype " + py_str(arr.attr("dtype")) +
               " to an array (numeric and bool dtypes only).");
  }
  if ((kind == "f" || kind == "c") &&
      nb::cast<int>(arr.attr("dtype").attr("itemsize")) >
          (kind == "f" ? 8 : 16)) {
    arr = arr.attr("astype")(kind == "f" ? "float64" : "complex128");
  }
  Py_buffer view;
  if (PyObject_GetBuffer(arr.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) !=
      0) {
    PyErr_Clear();
    type_error("cannot convert an object of type " + py_type_name(obj) +
               " (NumPy dtype " + py_str(arr.attr("dtype")) + ") to an array.");
  }
  struct Release {
    Py_buffer* v;
    ~Release() { PyBuffer_Release(v); }
  } release{&view};
  bool complex128 = false;
  auto src =
      format_dtype(view.format ? view.format : "B", view.itemsize, complex128);
  if (!src) {
    type_error("cannot convert an object of type " + py_type_name(obj) +
               " with element format '" +
               std::string(view.format ? view.format : "?") + "' to an array.");
  }
  Shape shape;
  for (int i = 0; i < view.ndim; ++i) {
    if (view.shape[i] > std::numeric_limits<int32_t>::max()) {
      // OverflowError with MLX's words, which programs may match:
      // dimensions are 32-bit.
      PyErr_SetString(
          PyExc_OverflowError,
          ("Shape dimension " + std::to_string(view.shape[i]) +
           " is outside the supported range [-2147483648, 2147483647]. MLX "
           "currently uses 32-bit integers for shape dimensions.")
              .c_str());
      throw nb::python_error();
    }
    shape.push_back(static_cast<int32_t>(view.shape[i]));
  }
  // MLX's defaults: float64 and complex128 become float32 and complex64.
  Dtype def = *src == float64 ? float32 : *src;
  Dtype out = dtype.value_or(def);
  if (complex128) {
    auto* p = static_cast<const std::complex<double>*>(view.buf);
    std::vector<complex64_t> v(shape_size(shape));
    for (size_t i = 0; i < v.size(); ++i) v[i] = complex64_t(p[i]);
    return array(v.data(), shape, out);
  }
  if (out == *src) {
    size_t nbytes = shape_size(shape) * out.size;
    auto buf = allocator::malloc(nbytes);
    if (nbytes) std::memcpy(buf.raw(), view.buf, nbytes);
    return array(buf, shape, out);
  }
  return dispatch_type(*src, [&](auto tag) {
    using T = KILN_TYPE(tag);
    return array(static_cast<const T*>(view.buf), shape, out);
  });
}

namespace {

const char* buffer_format(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_: return "?";
    case Dtype::Val::uint8: return "B";
    case Dtype::Val::uint16: return "H";
    case Dtype::Val::uint32: return "I";
    case Dtype::Val::uint64: return "Q";
    case Dtype::Val::int8: return "b";
    case Dtype::Val::int16: return "h";
    case Dtype::Val::int32: return "i";
    case Dtype::Val::int64: return "q";
    case Dtype::Val::float16: return "e";
    case Dtype::Val::float32: return "f";
    case Dtype::Val::float64: return "d";
    case Dtype::Val::complex64: return "Zf";
    // Not a PEP 3118 code, as in MLX: memoryview and other readers that
    // take raw bytes accept it; NumPy refuses it.
    case Dtype::Val::bfloat16: return "bfloat16";
    default: return nullptr;
  }
}

constexpr const char* kBfloat16Message =
    "bfloat16 arrays cannot be converted to NumPy (NumPy has no bfloat16 "
    "type): cast first, for example a.astype(kiln.core.float32).";

// What an export keeps alive: the array (its buffer) and the shape and
// strides the Py_buffer points to.
struct Export {
  array a;
  std::vector<Py_ssize_t> shape, strides;
};

int getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    array a = nb::cast<array>(nb::handle(obj));
    eval_released({a});
    bool need_contig = (flags & PyBUF_STRIDES) != PyBUF_STRIDES ||
                       (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS ||
                       (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS ||
                       (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS;
    if (need_contig && !a.flags().row_contiguous) {
      a = contiguous(a);
      eval_released({a});
    }
    auto* e = new Export{a, {}, {}};
    for (size_t i = 0; i < a.ndim(); ++i) {
      e->shape.push_back(a.shape()[i]);
      e->strides.push_back(a.strides()[i] * a.itemsize());
    }
    view->buf = a.data<char>();
    view->obj = obj;
    Py_INCREF(obj);
    view->len = a.nbytes();
    view->readonly = 0;
    view->itemsize = a.itemsize();
    view->format = (flags & PyBUF_FORMAT)
                       ? const_cast<char*>(buffer_format(a.dtype()))
                       : nullptr;
    view->ndim = static_cast<int>(a.ndim());
    view->shape = e->shape.data();
    view->strides = e->strides.data();
    view->suboffsets = nullptr;
    view->internal = e;
    return 0;
  } catch (const std::exception& ex) {
    PyErr_SetString(PyExc_BufferError, ex.what());
    return -1;
  }
}

void releasebuffer(PyObject*, Py_buffer* view) {
  delete static_cast<Export*>(view->internal);
}

PyType_Slot slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(getbuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(releasebuffer)},
    {0, nullptr}};

} // namespace

PyType_Slot* array_buffer_slots() { return slots; }

void init_numpy(nb::class_<array>& cls) {
  cls.def(
      "__array__",
      [](nb::handle self, nb::handle dtype, nb::handle copy) {
        array a = nb::cast<array>(self);
        if (a.dtype() == bfloat16) throw nb::value_error(kBfloat16Message);
        nb::module_ np = nb::module_::import_("numpy");
        PyObject* mv = PyMemoryView_FromObject(self.ptr());
        if (!mv) throw nb::python_error();
        nb::object out = np.attr("asarray")(nb::steal(mv));
        if (!dtype.is_none()) out = out.attr("astype")(dtype);
        if (!copy.is_none() && nb::cast<bool>(copy)) {
          out = out.attr("copy")();
        }
        return out;
      },
      "dtype"_a = nb::none(), "copy"_a = nb::none(),
      "A NumPy array sharing this array's memory where its layout allows.");
}

} // namespace kiln::py
