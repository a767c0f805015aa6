// Dtype objects, dtype categories, issubdtype, finfo and iinfo.
#include <cmath>
#include <limits>
#include <sstream>

#include "kiln_py.h"

namespace kiln::py {

namespace {

struct FInfo {
  Dtype dtype;
  double min, max, eps, smallest_normal;
  int bits;
};

struct IInfo {
  Dtype dtype;
  nb::object min, max;
};

FInfo finfo(Dtype d) {
  // A complex type reports its real component's limits (the array API's
  // rule, and MLX's).
  if (d == complex64) d = float32;
  if (!is_floating_point(d)) {
    throw nb::value_error(
        ("[finfo] dtype " + dtype_name(d) + " is not a floating type.")
            .c_str());
  }
  FInfo f{d, 0, 0, 0, 0, d.size * 8};
  if (d == float16) {
    f.max = 65504.0, f.eps = std::ldexp(1.0, -10);
    f.smallest_normal = std::ldexp(1.0, -14);
  } else if (d == bfloat16) {
    f.max = std::ldexp(255.0, 120), f.eps = std::ldexp(1.0, -7);
    f.smallest_normal = std::ldexp(1.0, -126);
  } else if (d == float32) {
    f.max = std::numeric_limits<float>::max();
    f.eps = std::numeric_limits<float>::epsilon();
    f.smallest_normal = std::numeric_limits<float>::min();
  } else {
    f.max = std::numeric_limits<double>::max();
    f.eps = std::numeric_limits<double>::epsilon();
    f.smallest_normal = std::numeric_limits<double>::min();
  }
  f.min = -f.max;
  return f;
}

IInfo iinfo(Dtype d) {
  if (!is_integral(d)) {
    throw nb::value_error(
        ("[iinfo] dtype " + dtype_name(d) + " is not an integer type.")
            .c_str());
  }
  return dispatch_type(d, [&](auto tag) -> IInfo {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_integral_v<T>) {
      return IInfo{
          d, nb::int_(static_cast<int64_t>(std::numeric_limits<T>::min())),
          nb::steal(PyLong_FromUnsignedLongLong(
              static_cast<uint64_t>(std::numeric_limits<T>::max())))};
    }
    throw nb::value_error("[iinfo] not an integer type.");
  });
}

// As MLX prints finfo: six significant digits.
std::string fmt_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

} // namespace

void init_dtype(nb::module_& m) {
  nb::class_<Dtype>(m, "Dtype", "An element type of arrays.")
      .def_prop_ro(
          "size", [](const Dtype& d) { return int(d.size); },
          "Size of one element in bytes.")
      // str() as repr(), as MLX's: "kiln.core.float32".
      .def("__repr__",
           [](const Dtype& d) { return core_display_name() + "." + dtype_name(d); })
      .def("__str__",
           [](const Dtype& d) { return core_display_name() + "." + dtype_name(d); })
      .def("__eq__",
           [](const Dtype& a, nb::handle b) {
             return nb::isinstance<Dtype>(b) && a.val == nb::cast<Dtype>(b).val;
           })
      .def("__ne__",
           [](const Dtype& a, nb::handle b) {
             return !(nb::isinstance<Dtype>(b) &&
                      a.val == nb::cast<Dtype>(b).val);
           })
      .def("__hash__", [](const Dtype& d) { return static_cast<int>(d.val); });

  m.attr("bool_") = bool_;
  m.attr("uint8") = uint8;
  m.attr("uint16") = uint16;
  m.attr("uint32") = uint32;
  m.attr("uint64") = uint64;
  m.attr("int8") = int8;
  m.attr("int16") = int16;
  m.attr("int32") = int32;
  m.attr("int64") = int64;
  m.attr("float16") = float16;
  m.attr("bfloat16") = bfloat16;
  m.attr("float32") = float32;
  m.attr("float64") = float64;
  m.attr("complex64") = complex64;

  nb::enum_<Dtype::Category>(m, "DtypeCategory",
                             "Abstract categories of dtypes.")
      .value("complexfloating", Dtype::Category::complexfloating)
      .value("floating", Dtype::Category::floating)
      .value("inexact", Dtype::Category::inexact)
      .value("signedinteger", Dtype::Category::signedinteger)
      .value("unsignedinteger", Dtype::Category::unsignedinteger)
      .value("integer", Dtype::Category::integer)
      .value("number", Dtype::Category::number)
      .value("generic", Dtype::Category::generic);
  for (const char* c :
       {"complexfloating", "floating", "inexact", "signedinteger",
        "unsignedinteger", "integer", "number", "generic"}) {
    m.attr(c) = m.attr("DtypeCategory").attr(c);
  }

  using DorC = std::variant<Dtype, Dtype::Category>;
  m.def(
      "issubdtype",
      [](const DorC& a, const DorC& b) {
        return std::visit([](auto x, auto y) { return kiln::issubdtype(x, y); },
                          a, b);
      },
      "arg1"_a, "arg2"_a,
      "True when the first dtype or category is below the second one.");

  m.def(
      "can_cast",
      [](const std::variant<Dtype, array>& from, Dtype to) {
        Dtype f = std::holds_alternative<Dtype>(from)
                      ? std::get<Dtype>(from)
                      : std::get<array>(from).dtype();
        return promote_types(f, to) == to;
      },
      "from_"_a, "to"_a,
      "True when promoting from_ (a dtype or an array's dtype) with to "
      "gives to.");
  m.def(
      "isdtype",
      [](Dtype dtype, nb::handle kind) {
        auto matches = [&](nb::handle k) {
          if (nb::isinstance<Dtype>(k)) return nb::cast<Dtype>(k) == dtype;
          if (!nb::isinstance<nb::str>(k)) {
            throw nb::type_error(("[isdtype] kind must be a Dtype, a str or "
                                  "a tuple of them, got " +
                                  py_type_name(k) + ".")
                                     .c_str());
          }
          auto name = nb::cast<std::string>(k);
          if (name == "bool") return dtype == bool_;
          if (name == "signed integer") {
            return kiln::issubdtype(dtype, signedinteger);
          }
          if (name == "unsigned integer") {
            return kiln::issubdtype(dtype, unsignedinteger);
          }
          if (name == "integral") return kiln::issubdtype(dtype, integer);
          if (name == "real floating") return kiln::issubdtype(dtype, floating);
          if (name == "complex floating") {
            return kiln::issubdtype(dtype, complexfloating);
          }
          if (name == "numeric") return dtype != bool_;
          throw nb::value_error(("[isdtype] unknown kind '" + name +
                                 "'; expected 'bool', 'signed integer', "
                                 "'unsigned integer', 'integral', 'real "
                                 "floating', 'complex floating' or "
                                 "'numeric'.")
                                    .c_str());
        };
        if (nb::isinstance<nb::tuple>(kind)) {
          for (nb::handle k : nb::cast<nb::tuple>(kind)) {
            if (matches(k)) return true;
          }
          return false;
        }
        return matches(kind);
      },
      "dtype"_a, "kind"_a,
      "True when dtype is one of the kinds: a Dtype, or 'bool', 'signed "
      "integer', 'unsigned integer', 'integral', 'real floating', 'complex "
      "floating', 'numeric', or a tuple of them.");

  nb::class_<FInfo>(m, "finfo", "Limits of a floating dtype.")
      .def(
          "__init__", [](FInfo* f, Dtype d) { new (f) FInfo(finfo(d)); },
          "dtype"_a)
      .def_ro("dtype", &FInfo::dtype)
      .def_ro("min", &FInfo::min)
      .def_ro("max", &FInfo::max)
      .def_ro("eps", &FInfo::eps)
      .def_ro("smallest_normal", &FInfo::smallest_normal)
      .def_ro("bits", &FInfo::bits)
      .def("__repr__", [](const FInfo& f) {
        return "finfo(min=" + fmt_number(f.min) + ", max=" + fmt_number(f.max) +
               ", dtype=" + dtype_name(f.dtype) + ")";
      });

  nb::class_<IInfo>(m, "iinfo", "Limits of an integer dtype.")
      .def(
          "__init__", [](IInfo* i, Dtype d) { new (i) IInfo(iinfo(d)); },
          "dtype"_a)
      .def_ro("dtype", &IInfo::dtype)
      .def_ro("min", &IInfo::min)
      .def_ro("max", &IInfo::max)
      .def("__repr__", [](const IInfo& i) {
        return "iinfo(min=" + py_str(i.min) + ", max=" + py_str(i.max) +
               ", dtype=" + dtype_name(i.dtype) + ")";
      });
}

} // namespace kiln::py
