// NumPy interop: the buffer protocol (zero-copy for any strided layout of
// an evaluated array) and __array__ built on it.
#include "kiln_py.h"

namespace kiln::py {

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
    if (a.dtype() == bfloat16) {
      PyErr_SetString(PyExc_ValueError, kBfloat16Message);
      return -1;
    }
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
