// Ahead-of-time quantization kernels: 4 and 8 bits (the widths models
// ship in) on float32, float16 and bfloat16, the tensor-core products of
// float16 and bfloat16, and the microscaling modes' matvec and dequantize
// (mxfp4, nvfp4, mxfp8). Other widths, mixed dtypes, and everything in
// the JIT build, are compiled by NVRTC at first use.
#include <type_traits>

#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/device/quantized.cuh"
#include "kiln/backend/cuda/device/quantized_fp.cuh"
#include "kiln/backend/cuda/quantized.h"

namespace kiln::cuda {

namespace {

template <typename T, int Bits, int Threads>
void matvec(AotTable& t) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, quantized_matvec_kernel(d, Bits, 1, Threads),
           reinterpret_cast<const void*>(
               &quantized_matvec<T, Bits, 1, Threads>));
  aot::put(t, quantized_matvec_kernel(d, Bits, 2, Threads),
           reinterpret_cast<const void*>(
               &quantized_matvec<T, Bits, 2, Threads>));
  aot::put(t, quantized_matvec_kernel(d, Bits, 4, Threads),
           reinterpret_cast<const void*>(
               &quantized_matvec<T, Bits, 4, Threads>));
}

template <typename T, int Bits>
void width(AotTable& t) {
  Dtype d = aot::dtype_v<T>;
  matvec<T, Bits, 32>(t);
  matvec<T, Bits, 64>(t);
  matvec<T, Bits, 128>(t);
  aot::put(t, dequantize_kernel(d, d, Bits),
           reinterpret_cast<const void*>(&dequantize<T, T, Bits>));
}

// One microscaling mode: its matvec's variants and its dequantize.
template <typename T, int Bits, int GroupSize>
void fp_mode(AotTable& t) {
  Dtype d = aot::dtype_v<T>;
  auto matvec = [&](auto rows, auto threads) {
    constexpr int r = decltype(rows)::value, th = decltype(threads)::value;
    aot::put(t, quantized_matvec_fp_kernel(d, Bits, GroupSize, r, th),
             reinterpret_cast<const void*>(
                 &quantized_matvec_fp<T, Bits, GroupSize, r, th>));
  };
  auto all_rows = [&](auto threads) {
    matvec(std::integral_constant<int, 1>{}, threads);
    matvec(std::integral_constant<int, 2>{}, threads);
    matvec(std::integral_constant<int, 4>{}, threads);
  };
  all_rows(std::integral_constant<int, 32>{});
  all_rows(std::integral_constant<int, 64>{});
  all_rows(std::integral_constant<int, 128>{});
  aot::put(t, dequantize_fp_kernel(d, Bits, GroupSize),
           reinterpret_cast<const void*>(&dequantize_fp<T, Bits, GroupSize>));
}

template <typename T>
void widths(AotTable& t) {
  fp_mode<T, 4, 32>(t);
  fp_mode<T, 4, 16>(t);
  fp_mode<T, 8, 32>(t);
  width<T, 4>(t);
  width<T, 8>(t);
  if constexpr (!std::is_same_v<T, float>) {
    Dtype d = aot::dtype_v<T>;
    aot::put(t, quantized_mma_kernel(d, 4),
             reinterpret_cast<const void*>(&quantized_mma<T, 4>));
    aot::put(t, quantized_mma_kernel(d, 8),
             reinterpret_cast<const void*>(&quantized_mma<T, 8>));
    aot::put(t, quantized_gemm_kernel(d, 4),
             reinterpret_cast<const void*>(&quantized_gemm<T, 4>));
    aot::put(t, quantized_gemm_kernel(d, 8),
             reinterpret_cast<const void*>(&quantized_gemm<T, 8>));
    aot::put(t, sum_partials_kernel(d),
             reinterpret_cast<const void*>(&sum_partials<T>));
  }
}

} // namespace

void add_aot_quantized(AotTable& t) {
  widths<float>(t);
  widths<__half>(t);
  widths<__nv_bfloat16>(t);
}

} // namespace kiln::cuda
