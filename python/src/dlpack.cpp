// DLPack interop: array.__dlpack__ / __dlpack_device__ export an evaluated
// array without copying, host or GPU memory (nanobind builds the capsule;
// the capsule keeps the array alive), and from_dlpack takes a producer's
// GPU memory without copying and copies host memory into a new array.
#include <nanobind/ndarray.h>

#include <algorithm>
#include <complex>
#include <cstring>
#include <optional>

#include "kiln_py.h"
#if KILN_HAS_CUDA
#include "kiln/backend/cuda/interop.h"
#endif

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
      if (t.bits == 128) return complex64; // read as complex128, narrowed
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

using AnyArray = nb::ndarray<nb::ro>;

constexpr int kDlCpu = 1, kDlCuda = 2;

// DLPack's stream argument as a CUDA stream: None or 1 the legacy default
// stream, 2 the per-thread default stream, -1 no ordering, else a
// cudaStream_t.
#if KILN_HAS_CUDA
cudaStream_t consumer_stream(nb::handle stream, bool& order) {
  order = true;
  if (stream.is_none()) return cudaStreamLegacy;
  auto v = nb::cast<intptr_t>(stream);
  if (v == -1) {
    order = false;
    return nullptr;
  }
  if (v == 0) {
    throw nb::value_error("[__dlpack__] stream 0 is ambiguous for CUDA; "
                          "pass 1 for the legacy default stream.");
  }
  if (v == 1) return cudaStreamLegacy;
  if (v == 2) return cudaStreamPerThread;
  return reinterpret_cast<cudaStream_t>(v);
}
#endif

// The exported view as a DLPack capsule (nanobind's form of an ndarray
// without a framework): shape and strides of the evaluated array, owned by
// a capsule that holds a reference to it. A GPU array's memory is ordered
// on the consumer's stream first.
nb::object as_ndarray(const array& a, nb::handle stream) {
  eval_released({a});
  auto* keep = new array(a);
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<array*>(p); });
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  std::vector<int64_t> strides(a.strides().begin(), a.strides().end());
  const void* data = nullptr;
  int device = kDlCpu, device_id = 0;
#if KILN_HAS_CUDA
  if (a.on_device()) {
    bool order = true;
    cudaStream_t consumer = consumer_stream(stream, order);
    if (order) {
      nb::gil_scoped_release release;
      cuda::export_to_stream(a, consumer);
    }
    data = a.raw_data_ptr();
    device = kDlCuda;
    device_id = cuda::device_ordinal();
  }
#endif
  if (data == nullptr) data = a.data<void>();
  nb::ndarray<nb::ro> view(data, a.ndim(), shape.data(), owner,
                           strides.data(), to_dl(a.dtype()), device,
                           device_id);
  return nb::cast(view, nb::rv_policy::reference);
}

#if KILN_HAS_CUDA
// A producer's GPU memory as a kiln array, without a copy: the producer is
// asked for its capsule ordered on the legacy default stream, which kiln's
// stream then waits for; the capsule lives until kiln lets go.
array adopt(nb::handle x, const AnyArray& in, Dtype dt) {
  if (in.device_id() != cuda::device_ordinal()) {
    throw nb::value_error(
        ("[from_dlpack] the array is on GPU " +
         std::to_string(in.device_id()) + " but kiln uses GPU " +
         std::to_string(cuda::device_ordinal()) + " (KILN_DEVICE).")
            .c_str());
  }
  Shape shape;
  Strides strides;
  int64_t last = 0;
  for (size_t d = 0; d < in.ndim(); ++d) {
    shape.push_back(static_cast<int>(in.shape(d)));
    strides.push_back(in.stride(d));
    if (in.shape(d) == 0) last = -1;
    if (last >= 0 && in.stride(d) < 0) {
      throw nb::value_error("[from_dlpack] negative strides are not "
                            "supported.");
    }
    if (last >= 0) last += int64_t(in.shape(d) - 1) * in.stride(d);
  }
  size_t span = last < 0 ? 0 : size_t(last + 1) * dt.size;
  // Holding the Python object keeps its memory alive; it is dropped with
  // the GIL once kiln's streams are done with the memory.
  auto* owner = new nb::object(nb::borrow(x));
  auto release = [owner] {
    if (!Py_IsInitialized()) return; // at exit: the producer is gone too
    nb::gil_scoped_acquire gil;
    delete owner;
  };
  return cuda::adopt_device_memory(const_cast<void*>(in.data()), span,
                                   std::move(shape), std::move(strides), dt,
                                   release, cudaStreamLegacy);
}
#endif

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

// Host memory copied into a new array (kiln does not hold on to memory it
// does not own), in the producer's layout, as MLX keeps it: a transposed,
// stepped or broadcast NumPy view stays one. A view with negative strides
// is copied row by row (MLX raises).
// float64 and complex128 narrow to float32 and complex64, as MLX's do.
array copy_host(const AnyArray& in, Dtype read) {
  Dtype dt = read == float64 ? float32 : read;
  Shape shape;
  std::vector<size_t> dims;
  std::vector<int64_t> strides;
  size_t n = 1;
  for (size_t d = 0; d < in.ndim(); ++d) {
    shape.push_back(static_cast<int>(in.shape(d)));
    dims.push_back(in.shape(d));
    strides.push_back(in.stride(d));
    n *= in.shape(d);
  }
  auto src = static_cast<const char*>(in.data());
  size_t item = in.dtype().bits / 8;
  bool complex128 = in.dtype().code ==
                        static_cast<uint8_t>(dl::dtype_code::Complex) &&
                    in.dtype().bits == 128;
  int64_t last = 0; // the span's last element, from the first
  bool forward = n > 0 && !complex128;
  for (size_t d = 0; d < dims.size() && forward; ++d) {
    forward = strides[d] >= 0;
    last += int64_t(dims[d] - 1) * strides[d];
  }
  if (forward) {
    // The whole span, read with the producer's strides (gaps and repeats
    // included).
    size_t span = size_t(last + 1);
    auto buf = allocator::malloc(span * item);
    std::memcpy(buf.raw(), src, span * item);
    array flat(buf, {static_cast<int>(span)}, read);
    Strides st(strides.begin(), strides.end());
    array out = as_strided(flat, shape, st, 0);
    return read == dt ? out : astype(out, dt);
  }
  std::vector<char> rows(n * item);
  if (n > 0) {
    copy_strided(src, rows.data(), dims.data(), strides.data(), dims.size(),
                 item);
  }
  if (complex128) {
    auto* p = reinterpret_cast<const std::complex<double>*>(rows.data());
    std::vector<complex64_t> v(p, p + n);
    return array(v.data(), shape, complex64);
  }
  auto buf = allocator::malloc(n * item);
  if (n > 0) std::memcpy(buf.raw(), rows.data(), n * item);
  array out(buf, shape, read);
  return read == dt ? out : astype(out, dt);
}

} // namespace

void init_dlpack(nb::module_& m, nb::class_<array>& cls) {
  cls.def(
      "__dlpack__",
      [](const array& a, nb::kwargs kwargs) {
        nb::object stream = nb::none();
        if (kwargs.contains("stream")) stream = kwargs["stream"];
        if (kwargs.contains("copy") &&
            nb::cast<bool>(nb::bool_(kwargs["copy"]))) {
          return as_ndarray(contiguous(a), stream);
        }
        return as_ndarray(a, stream);
      },
      "kwargs"_a,
      "A DLPack capsule viewing the array's memory, host or GPU (a GPU "
      "array is ordered on the consumer's `stream` first).");
  cls.def(
      "__dlpack_device__",
      [](const array& a) {
#if KILN_HAS_CUDA
        eval_released({a});
        if (a.on_device()) {
          return nb::make_tuple(kDlCuda, cuda::device_ordinal());
        }
#endif
        return nb::make_tuple(kDlCpu, 0);
      },
      "The DLPack device: (1, 0) for host memory, (2, GPU) for GPU "
      "memory (the array is evaluated to know).");
  m.def(
      "from_dlpack",
      [](nb::handle x, std::optional<bool> copy) {
        AnyArray in;
        try {
          in = nb::cast<AnyArray>(x);
        } catch (const nb::cast_error&) {
          throw nb::type_error(("[from_dlpack] expected an object with "
                                "__dlpack__, got " +
                                py_type_name(x) + ".")
                                   .c_str());
        }
        Dtype dt = from_dl(in.dtype());
        if (in.device_type() == kDlCuda) {
#if KILN_HAS_CUDA
          if (copy && *copy) {
            throw nb::value_error("[from_dlpack] copy=True: kiln takes GPU "
                                  "memory without a copy; copy it after.");
          }
          return adopt(x, in, dt);
#else
          throw nb::value_error("[from_dlpack] the array is in GPU memory "
                                "and this kiln was built without CUDA.");
#endif
        }
        if (in.device_type() != kDlCpu) {
          throw nb::value_error(
              ("[from_dlpack] DLPack device type " +
               std::to_string(in.device_type()) +
               " is neither the CPU (1) nor CUDA (2).")
                  .c_str());
        }
        if (copy && !*copy) {
          throw nb::value_error(
              "[from_dlpack] copy=False cannot be honoured for host memory: "
              "kiln copies host memory it does not own.");
        }
        return copy_host(in, dt);
      },
      "x"_a, nb::kw_only(), "copy"_a = nb::none(),
      "An array over a DLPack producer's memory: GPU memory without a copy "
      "(copy=True raises), host memory copied (copy=False raises).");
}

} // namespace kiln::py
