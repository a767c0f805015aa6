// cuBLAS's routines that cuBLASLt (kiln's GEMM library) lacks, loaded at
// run time as cuSOLVER is (which needs cuBLAS itself, so a machine with
// one has both). Column-major matrices stored one after another, as in
// cusolver.h.
#pragma once

#include <cstdint>

#include "kiln/core/device.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda::cublas {

/** True when a cuBLAS library loaded (KILN_CUBLAS_LIBRARY, else
 *  libcublas.so.13 or .12 from the loader's path or the toolkit's library
 *  directory). */
bool available();

/** Solves A X = B in place of B for n x n triangular matrices A (the
 *  triangle read: upper or lower, a non-unit diagonal) and n x nrhs right
 *  sides B, float32 or float64, on kiln stream s. Nothing checks A's
 *  diagonal: a zero on it gives infinities. */
void trsm(bool upper, int64_t n, int64_t nrhs, int64_t batch, Dtype dt,
          const void* a, void* b, const Stream& s);

/** LU with partial pivoting of a batch of n x n matrices, one call over
 *  them all (cuBLAS's batched getrf, for small matrices): ipiv gets n
 *  1-based int32 rows per matrix, info a status per matrix (LAPACK's). */
void getrf_batched(int64_t n, int64_t batch, Dtype dt, void* a, int* ipiv,
                   int* info, const Stream& s);

} // namespace kiln::cuda::cublas
