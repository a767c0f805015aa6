// The FFT's kernels around cuFFT (backend/cuda/fft.cpp): cuFFT leaves its
// transforms unscaled, and its complex-to-real transform is given spectra
// whose frequency 0 (and n / 2 for even n) is real, as the CPU reads them.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

/** data[i] *= scale over n values (complex values as pairs of T). */
template <typename T, int N>
__global__ void fft_scale(T* __restrict__ data, int64_t n, T scale) {
  bool vec = is_aligned<T, N>(data);
  for (int64_t i = first_index<N>(); i < n; i += grid_step<N>()) {
    if (vec && i + N <= n) {
      auto x = *reinterpret_cast<Vec<T, N>*>(data + i);
#pragma unroll
      for (int j = 0; j < N; ++j) x.v[j] *= scale;
      *reinterpret_cast<Vec<T, N>*>(data + i) = x;
    } else {
      for (int j = 0; j < N && i + j < n; ++j) data[i + j] *= scale;
    }
  }
}

/** The spectra a complex-to-real transform reads: out = in * scale over n
 *  complex values (pairs of T; in may be out), packed with m = n_points / 2
 *  + 1 frequencies along the real axis and `inner` values after it, less
 *  the imaginary parts of frequency 0 and, for even n_points, n_points / 2
 *  (the last): a real signal's spectrum has none there. Scaling the input
 *  of the linear transform spares a pass over its output. */
template <typename T>
__global__ void fft_spectra(const T* in, T* out, int64_t n, int64_t m,
                            int64_t inner, int even, T scale) {
  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {
    int64_t k = (inner == 1 ? i : i / inner) % m;
    auto z = reinterpret_cast<const Vec<T, 2>*>(in)[i];
    z.v[0] *= scale;
    z.v[1] = k == 0 || (even && k == m - 1) ? T(0) : z.v[1] * scale;
    reinterpret_cast<Vec<T, 2>*>(out)[i] = z;
  }
}

} // namespace kiln::cuda
