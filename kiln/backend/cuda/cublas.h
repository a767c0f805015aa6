// cuBLAS's routines that cuBLASLt (kiln's GEMM library) lacks, loaded at
// run time as cuSOLVER is (which needs cuBLAS itself, so a machine with
// one has both). Column-major matrices stored one after another, as in
// cusolver.h.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/core/device.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda::cublas {

/** True when a cuBLAS library loaded (KILN_CUBLAS_LIBRARY, else
 *  libcublas.so.13 or .12 from the loader's path or the toolkit's library
 *  directory). */
bool available();

/** Whether gemm_batched takes dt. */
bool gemm_batched_supports(Dtype dt);

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

/** Row-major products C_p (m x n) = A_p (m x k) @ B_p (k x n) for the
 *  `batch` address triples in the device arrays a, b, c, one cuBLAS call
 *  (gemmBatchedEx): A_p and B_p row-major, or stored transposed when
 *  a_trans / b_trans, with leading dimensions lda, ldb; C_p packed.
 *  float16 and bfloat16 accumulate in float32, float32 in float32 (TF32
 *  when gemm.h's switch allows it), float64 in float64. */
void gemm_batched(int64_t m, int64_t n, int64_t k, Dtype dt,
                  const void* const* a, bool a_trans, int64_t lda,
                  const void* const* b, bool b_trans, int64_t ldb,
                  void* const* c, int64_t batch, const Stream& s);

/** One GEMM per group g: row-major C_g (ms[g] x n, packed) = A_g
 *  (ms[g] x ks[g]) @ B_g (ks[g] x n), A_g and B_g row-major or stored
 *  transposed (a_trans, b_trans) with leading dimensions lda, ldb, for the
 *  device address arrays a, b, c of ms.size() entries; types as
 *  gemm_batched. One call of cuBLAS's grouped batched GEMM (cuBLAS 12.5
 *  on): false, nothing done, when the loaded cuBLAS lacks it or refuses
 *  the problem. */
bool gemm_grouped(const std::vector<int>& ms, const std::vector<int>& ks,
                  int64_t n, Dtype dt, const void* const* a, bool a_trans,
                  int64_t lda, const void* const* b, bool b_trans,
                  int64_t ldb, void* const* c, const Stream& s);

/** How many gemm_grouped calls ran in this process (tests). */
int64_t grouped_gemm_calls();

} // namespace kiln::cuda::cublas
