// Ahead-of-time im2col kernels (device/conv.cuh) for conv1d/2d/3d on
// float32/float16/bfloat16 with 32-bit row and column indices. float64, the
// 64-bit variants, the float16/bfloat16 ones writing float32 patches (split
// reductions), and everything in the JIT build are compiled by NVRTC at
// first use.
#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/conv.h"
#include "kiln/backend/cuda/device/conv.cuh"

namespace kiln::cuda {

namespace {

template <typename T>
void im2cols(AotTable& t) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, im2col_kernel(d, d, 1, false),
           reinterpret_cast<const void*>(&im2col<T, T, 1, uint32_t>));
  aot::put(t, im2col_kernel(d, d, 2, false),
           reinterpret_cast<const void*>(&im2col<T, T, 2, uint32_t>));
  aot::put(t, im2col_kernel(d, d, 3, false),
           reinterpret_cast<const void*>(&im2col<T, T, 3, uint32_t>));
}

} // namespace

void add_aot_conv(AotTable& t) {
  im2cols<float>(t);
  im2cols<__half>(t);
  im2cols<__nv_bfloat16>(t);
}

} // namespace kiln::cuda
