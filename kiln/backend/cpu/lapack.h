// Helpers shared by the LAPACK-backed kernels: dtype dispatch, batch
// offsets, and the copies between strided row-major arrays and the
// column-major scratch LAPACKE works on.
#pragma once

#include "kiln/backend/cpu/blas.h" // the symbol names, before lapacke.h
#include <lapacke.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <complex>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/dispatch.h"
#include "kiln/primitives/linalg.h"

namespace kiln::lapack {

/** f(TypeTag<T>) for float32 and float64, and for complex64 where
 *  WithComplex (f is then compiled for complex64_t too). */
template <bool WithComplex = false, typename F>
void dispatch_lapack(Dtype dt, const char* op, F&& f) {
  if (dt == float32) {
    f(TypeTag<float>{});
  } else if (dt == float64) {
    f(TypeTag<double>{});
  } else if constexpr (WithComplex) {
    if (dt != complex64) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] only float32, float64 and complex64 "
                                  "are supported.");
    }
    f(TypeTag<complex64_t>{});
  } else {
    throw std::invalid_argument(std::string("[") + op +
                                "] only float32 and float64 are supported.");
  }
}

/** The type of T's real values: its own, or a complex type's parts (the
 *  singular values and Hermitian eigenvalues of complex matrices). */
template <typename T>
using real_of_t = decltype(std::real(std::declval<T>()));

// kiln's complex64 as LAPACKE's complex float (the same two floats).
inline lapack_complex_float* lapack_complex(complex64_t* p) {
  return reinterpret_cast<lapack_complex_float*>(p);
}

// Element offsets of each matrix over the leading (batch) dimensions.
inline std::vector<int64_t> batch_offsets(const array& x) {
  size_t nb = x.ndim() - 2;
  std::vector<int64_t> offs{0};
  for (size_t d = 0; d < nb; ++d) {
    std::vector<int64_t> next;
    next.reserve(offs.size() * x.shape(d));
    for (int64_t o : offs) {
      for (int i = 0; i < x.shape(d); ++i)
        next.push_back(o + i * x.strides()[d]);
    }
    offs = std::move(next);
  }
  return offs;
}

// The rows x cols matrix at p (any strides) into column-major dst.
template <typename T>
void read_cols(const array& x, int64_t off, T* dst) {
  int64_t rows = x.shape(-2), cols = x.shape(-1);
  int64_t sr = x.strides()[x.ndim() - 2], sc = x.strides().back();
  const T* p = x.data<T>() + off;
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) dst[c * rows + r] = p[r * sr + c * sc];
  }
}

// The top-left rows x cols block of a column-major matrix (leading dimension
// ld) into row-major dst.
template <typename T>
void write_rows(const T* src, int64_t ld, int64_t rows, int64_t cols, T* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[c * ld + r];
  }
}

inline void check_internal(const char* op, lapack_int info) {
  if (info < 0) {
    throw std::runtime_error(std::string("[") + op + "] LAPACK argument " +
                             std::to_string(-info) + " was invalid.");
  }
}

} // namespace kiln::lapack
