// cuSOLVER's dense routines (the 64-bit generic API where there is one),
// loaded at run time as cuFFT is: without the library the linear algebra
// primitives run on the CPU. Each call runs one routine over a batch of
// column-major matrices stored one after another (m x n, leading dimension
// m, unless said otherwise), on kiln stream s, with a status per matrix
// written into `info` (device ints, LAPACK's meaning).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/core/device.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda::cusolver {

/** True when a cuSOLVER library loaded (KILN_CUSOLVER_LIBRARY, else
 *  libcusolver.so.12 or .11 from the loader's path or the toolkit's library
 *  directory). */
bool available();

/** Whether cuSOLVER takes dt here: float32 and float64, when available. */
bool supports(Dtype dt);

/** Cholesky factors of n x n matrices in the triangle read (upper or
 *  lower), the other left as found. */
void potrf(bool upper, int64_t n, int64_t batch, Dtype dt, void* a, int* info,
           const Stream& s);
/** Inverses of n x n triangular matrices in the triangle read. */
void trtri(bool upper, int64_t n, int64_t batch, Dtype dt, void* a, int* info,
           const Stream& s);
/** LU with partial pivoting; ipiv holds min(m, n) 1-based rows per matrix.
 *  A zero on U's diagonal is reported in info, the factors still valid. */
void getrf(int64_t m, int64_t n, int64_t batch, Dtype dt, void* a,
           int64_t* ipiv, int* info, const Stream& s);
/** Solves op(A) X = B in place of B (n x nrhs each) from getrf's factors of
 *  the n x n matrices. */
void getrs(bool transpose, int64_t n, int64_t nrhs, int64_t batch, Dtype dt,
           const void* lu, const int64_t* ipiv, void* b, int* info,
           const Stream& s);
/** Eigenvalues (ascending, n per matrix, into w) and, with vectors, the
 *  eigenvectors over a (as columns) of symmetric n x n matrices read from
 *  one triangle. */
void syevd(bool vectors, bool upper, int64_t n, int64_t batch, Dtype dt,
           void* a, void* w, int* info, const Stream& s);
/** syevd for a batch of matrices of order up to syevj_batched_max_n, as
 *  one Jacobi call over them all (eigenvalues ascending, as syevd's). */
inline constexpr int64_t syevj_batched_max_n = 32;
void syevj_batched(bool vectors, bool upper, int64_t n, int64_t batch,
                   Dtype dt, void* a, void* w, int* info, const Stream& s);
/** Householder QR in place: R on and above the diagonal, the reflectors
 *  below it with their scales in tau (min(m, n) per matrix). */
void geqrf(int64_t m, int64_t n, int64_t batch, Dtype dt, void* a, void* tau,
           int* info, const Stream& s);
/** The first n columns of Q (m x n, n <= m) from geqrf's k reflectors, in
 *  place of matrices `stride` elements apart. */
void orgqr(int64_t m, int64_t n, int64_t k, int64_t stride, int64_t batch,
           Dtype dt, void* a, const void* tau, int* info, const Stream& s);
/** Singular values (min(m, n) per matrix, descending, into sv) and, with
 *  vectors, all of U (m x m) and V^T (n x n); needs m >= n. Overwrites a. */
void gesvd(bool vectors, int64_t m, int64_t n, int64_t batch, Dtype dt,
           void* a, void* sv, void* u, void* vt, int* info, const Stream& s);
/** The same by one-sided Jacobi rotations (PyTorch's default on the GPU),
 *  for any m and n: U (m x m) and V itself (n x n, not transposed); a
 *  batch of matrices of at most gesvdj_batched_max rows and columns as one
 *  gesvdjBatched call. A matrix gesvdj did not converge on within the
 *  sweep limit has a positive info; gesvdjBatched reports none (its info
 *  stays 0 when the limit cuts it short). */
inline constexpr int64_t gesvdj_batched_max = 32;
void gesvdj(bool vectors, int64_t m, int64_t n, int64_t batch, Dtype dt,
            void* a, void* sv, void* u, void* v, int* info, const Stream& s);
/** gesvdj's sweep limit (100 by default, gesvdjBatched's too); a test
 *  lowers it to reach the fallback to gesvd. */
void set_gesvdj_max_sweeps(int sweeps);

/** Whether this cuSOLVER has geev (CUDA 12.6 and later). */
bool has_geev();
/** Eigenvalues of general real n x n float32 matrices (n complex64 per
 *  matrix, into w) and, with vectors, their right eigenvectors in LAPACK's
 *  real layout (a complex pair's real part in column j, imaginary part in
 *  column j + 1) into vr. Overwrites a. */
void geev(bool vectors, int64_t n, int64_t batch, void* a, void* w, void* vr,
          int* info, const Stream& s);

/** The batch's info values (waits for stream s). */
std::vector<int> read_info(const int* info, int64_t batch, const Stream& s);

} // namespace kiln::cuda::cusolver
