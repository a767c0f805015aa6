// Ahead-of-time kernels that create data: arange on the common dtypes, the
// Threefry random bits, and the float32 erf/erfinv the samplers run.
// Everything else is compiled by NVRTC at first use (gather and scatter
// always are).
#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/creation.h"
#include "kiln/backend/cuda/device/creation.cuh"
#include "kiln/backend/cuda/device/random.cuh"

namespace kiln::cuda {

void add_aot_creation(AotTable& t) {
  using namespace aot;
  auto arange_of = [&](auto tag) {
    using T = decltype(tag);
    put(t, arange_kernel(dtype_v<T>),
        reinterpret_cast<const void*>(&arange<T>));
  };
  arange_of(float{});
  arange_of(__half{});
  arange_of(__nv_bfloat16{});
  arange_of(int32_t{});
  arange_of(int64_t{});
  arange_of(uint32_t{});
  put(t, random_bits_kernel(),
      reinterpret_cast<const void*>(&random_bits<0>));
  auto erfs = [&](auto tag) {
    using T = decltype(tag);
    unary<Float32Erf, T, T>(t, "Float32Erf");
    unary<Float32ErfInv, T, T>(t, "Float32ErfInv");
  };
  erfs(float{});
  erfs(__half{});
  erfs(__nv_bfloat16{});
}

} // namespace kiln::cuda
