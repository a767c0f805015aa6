// Arrays out to Python: nested lists, Python scalars; evaluation without
// the GIL; the stream and axis argument forms.
#include "kiln_py.h"

namespace kiln::py {

void eval_released(std::vector<array> arrays) {
  nb::gil_scoped_release release;
  eval(std::move(arrays));
}

namespace {

template <typename T>
nb::object scalar_out(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return nb::bool_(v);
  } else if constexpr (std::is_same_v<T, complex64_t>) {
    return nb::steal(PyComplex_FromDoubles(v.real(), v.imag()));
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_unsigned_v<T>) {
      return nb::steal(PyLong_FromUnsignedLongLong(v));
    } else {
      return nb::steal(PyLong_FromLongLong(v));
    }
  } else {
    if constexpr (is_half_v<T>) {
      return nb::float_(static_cast<double>(static_cast<float>(v)));
    } else {
      return nb::float_(static_cast<double>(v));
    }
  }
}

template <typename T>
nb::object tolist_rec(const array& a, const T* p, size_t dim) {
  if (dim == a.ndim()) return scalar_out(*p);
  nb::list out;
  for (int32_t i = 0; i < a.shape()[dim]; ++i) {
    out.append(tolist_rec(a, p + i * a.strides()[dim], dim + 1));
  }
  return out;
}

} // namespace

nb::object tolist(array a) {
  eval_released({a});
  return dispatch_type(a.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    return tolist_rec(a, a.data<T>(), 0);
  });
}

nb::object item(array a) {
  if (a.size() != 1) {
    throw nb::value_error(
        ("[item] only arrays of one element have an item; this one has " +
         std::to_string(a.size()) + " elements.")
            .c_str());
  }
  eval_released({a});
  return dispatch_type(a.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    return scalar_out(*a.data<T>());
  });
}

StreamOrDevice to_sod(const StreamArg& s) {
  if (!s) return {};
  if (auto* st = std::get_if<Stream>(&*s)) return *st;
  if (auto* t = std::get_if<ThreadLocalStream>(&*s)) return t->get();
  return std::get<Device>(*s);
}

Shape to_shape(const ShapeArg& s) {
  std::vector<int64_t> dims;
  if (auto* i = std::get_if<int64_t>(&s)) {
    dims.push_back(*i);
  } else {
    dims = std::get<std::vector<int64_t>>(s);
  }
  Shape out;
  for (int64_t d : dims) {
    if (d > INT32_MAX || d < INT32_MIN) {
      throw std::overflow_error("[shape] the size " + std::to_string(d) +
                                " does not fit in int32.");
    }
    out.push_back(static_cast<int32_t>(d));
  }
  return out;
}

std::vector<int> axes_of(const AxisArg& axis, int ndim) {
  if (!axis) {
    std::vector<int> all(ndim);
    for (int i = 0; i < ndim; ++i) all[i] = i;
    return all;
  }
  if (auto* i = std::get_if<int>(&*axis)) return {*i};
  return std::get<std::vector<int>>(*axis);
}

} // namespace kiln::py
