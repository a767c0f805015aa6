// DLPack interop: array.__dlpack__ / __dlpack_device__ export an evaluated
// array without copying (nanobind builds the capsule; the capsule keeps the
// array alive), and from_dlpack copies any CPU DLPack producer into a new
// array.
#include <nanobind/ndarray.h>

#include <cstring>

#include "kiln_py.h"

namespace kiln::py {

namespace {

namespace dl = nb::dlpack;

dl::dtype to_dl(Dtype d) {
  auto bits = static_cast<uint8_t>(d.size * 8);
  if (d == bool_) return {static_cast<uint8_t>(dl::dtype_code::Bool), 8, 1};
  if (d == bfloat16)
    return {static_cast<uint8_t>(dl::dtype_code::Bfloat), 16, 1};
  if (d == complex64)
    return {static_cast<uint8_t>(dl::dtype_code::Complex), 64, 1};
  if (is_floating_point(d))
    return {static_cast<uint8_t>(dl::dtype_code::Float), bits, 1};
  if (is_unsigned(d))
    return {static_cast<uint8_t>(dl::dtype_code::UInt), bits, 1};
  return {static_cast<uint8_t>(dl::dtype_code::Int), bits, 1};
}

Dtype from_dl(dl::dtype t) {
  if (t.lanes != 1) {
    throw nb::type_error(
        "[from_dlpack] vector (multi-lane) dtypes are not "
        "supported.");
  }
  auto code = static_cast<dl::dtype_code>(t.code);
  switch (code) {
    case dl::dtype_code::Bool: return bool_;
    case dl::dtype_code::Bfloat:
      if (t.bits == 16) return bfloat16;
      break;
    case dl::dtype_code::Complex:
      if (t.bits == 64) return complex64;
      break;
    case dl::dtype_code::Float:
      if (t.bits == 16) return float16;
      if (t.bits == 32) return float32;
      if (t.bits == 64) return float64;
      break;
    case dl::dtype_code::Int:
      if (t.bits == 8) return int8;
      if (t.bits == 16) return int16;
      if (t.bits == 32) return int32;
      if (t.bits == 64) return int64;
      break;
    case dl::dtype_code::UInt:
      if (t.bits == 8) return uint8;
      if (t.bits == 16) return uint16;
      if (t.bits == 32) return uint32;
      if (t.bits == 64) return uint64;
      break;
    default: break;
  }
  throw nb::type_error(("[from_dlpack] unsupported DLPack dtype (code " +
                        std::to_string(t.code) + ", " + std::to_string(t.bits) +
                        " bits).")
                           .c_str());
}

using AnyCpuArray = nb::ndarray<nb::ro, nb::device::cpu>;

// The exported view as a DLPack capsule (nanobind's form of an ndarray
// without a framework): shape and strides of the evaluated array, owned by
// a capsule that holds a reference to it.
nb::object as_ndarray(const array& a) {
  eval_released({a});
  auto* keep = new array(a);
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<array*>(p); });
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  std::vector<int64_t> strides(a.strides().begin(), a.strides().end());
  nb::ndarray<nb::ro> view(a.data<void>(), a.ndim(), shape.data(), owner,
                           strides.data(), to_dl(a.dtype()),
                           nb::device::cpu::value, 0);
  return nb::cast(view, nb::rv_policy::reference);
}

// Copies n-d strided bytes into a row-major buffer.
void copy_strided(const char* src, char* dst, const size_t* shape,
                  const int64_t* strides, size_t nd, size_t item) {
  if (nd == 0) {
    std::memcpy(dst, src, item);
    return;
  }
  size_t inner = 1;
  for (size_t d = 1; d < nd; ++d) inner *= shape[d];
  for (size_t i = 0; i < shape[0]; ++i) {
    copy_strided(src + int64_t(i) * strides[0] * int64_t(item),
                 dst + i * inner * item, shape + 1, strides + 1, nd - 1, item);
  }
}

} // namespace

void init_dlpack(nb::module_& m, nb::class_<array>& cls) {
  cls.def(
      "__dlpack__",
      [](const array& a, nb::kwargs kwargs) {
        if (kwargs.contains("copy") &&
            nb::cast<bool>(nb::bool_(kwargs["copy"]))) {
          return as_ndarray(contiguous(a));
        }
        return as_ndarray(a);
      },
      "kwargs"_a, "A DLPack capsule viewing the array's memory (CPU).");
  cls.def(
      "__dlpack_device__", [](const array&) { return nb::make_tuple(1, 0); },
      "The DLPack device: (1, 0), the CPU.");
  m.def(
      "from_dlpack",
      [](nb::handle x, std::optional<bool> copy) {
        if (copy && !*copy) {
          throw nb::value_error(
              "[from_dlpack] copy=False cannot be honoured: "
              "kiln copies memory it does not own.");
        }
        AnyCpuArray in;
        try {
          in = nb::cast<AnyCpuArray>(x);
        } catch (const nb::cast_error&) {
          throw nb::type_error(("[from_dlpack] expected a CPU object with "
                                "__dlpack__, got " +
                                py_type_name(x) + ".")
                                   .c_str());
        }
        Dtype dt = from_dl(in.dtype());
        Shape shape;
        std::vector<size_t> dims;
        std::vector<int64_t> strides;
        for (size_t d = 0; d < in.ndim(); ++d) {
          shape.push_back(static_cast<int>(in.shape(d)));
          dims.push_back(in.shape(d));
          strides.push_back(in.stride(d));
        }
        size_t n = 1;
        for (auto d : dims) n *= d;
        size_t item = dt.size;
        auto buf = allocator::malloc(n * item);
        if (n > 0) {
          copy_strided(static_cast<const char*>(in.data()),
                       static_cast<char*>(buf.raw()), dims.data(),
                       strides.data(), dims.size(), item);
        }
        return array(buf, shape, dt);
      },
      "x"_a, nb::kw_only(), "copy"_a = nb::none(),
      "An array with a copy of the data of a CPU DLPack producer.");
}

} // namespace kiln::py
