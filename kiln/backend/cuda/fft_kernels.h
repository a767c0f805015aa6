// Names and instantiations of the FFT's own kernels (device/fft.cuh):
// vFftScalefloat32 and vFftSpectrafloat32 (kiln's transforms are float32).
#pragma once

#include "kiln/backend/cuda/jit_module.h"

namespace kiln::cuda {

/** Floats per thread of the scale kernel (one 16-byte access). */
constexpr int fft_scale_width = 4;

JitKernel fft_scale_kernel();
JitKernel fft_spectra_kernel();

} // namespace kiln::cuda
