// Ahead-of-time instances of the FFT's own kernels (device/fft.cuh); the
// transforms themselves are cuFFT's.
#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/device/fft.cuh"
#include "kiln/backend/cuda/fft_kernels.h"

namespace kiln::cuda {

void add_aot_fft(AotTable& t) {
  aot::put(t, fft_scale_kernel(),
           reinterpret_cast<const void*>(&fft_scale<float, fft_scale_width>));
  aot::put(t, fft_spectra_kernel(),
           reinterpret_cast<const void*>(&fft_spectra<float>));
}

} // namespace kiln::cuda
