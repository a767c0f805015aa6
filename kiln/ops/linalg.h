// Matrix products, tensor contractions and linear algebra (kiln::linalg).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** Matrix product with NumPy's rules: a 1-d a gains a leading 1 and a 1-d b a
 *  trailing 1 (removed from the result); leading batch dimensions broadcast.
 *  Only inexact dtypes (floating, complex64) are supported, as in MLX. */
array matmul(const array& a, const array& b, StreamOrDevice s = {});

/** alpha * (a @ b) + beta * c, where c broadcasts to the product's shape.
 *  Real floating dtypes only. */
array addmm(array c, array a, array b, float alpha = 1.0f, float beta = 1.0f,
            StreamOrDevice s = {});

/** Products of matrices picked from the batches of a (..., M, K) and
 *  b (..., K, N), as MLX's gather_mm: lhs_indices and rhs_indices are
 *  integer arrays of flat indices into a's and b's batch (all of a batch,
 *  in order, when absent), broadcast together to the output's batch shape,
 *  out[i..., M, N] = a[lhs[i...]] @ b[rhs[i...]]. A 1-d a gains a leading
 *  1 and a 1-d b a trailing 1 (removed from the result). Each picked
 *  matrix is read in place, none is gathered into a copy; with neither
 *  index given it is matmul. sorted_indices says rhs_indices is sorted (a
 *  hint, as in MLX). Indices are not bounds-checked (as MLX): as in
 *  kiln's gathers a negative one counts from the end and any other out of
 *  range reads clamped into the batch. Real floating dtypes only. Under a
 *  shapeless compile an absent index is an arange fixed at trace (as in
 *  MLX): pass both to replay at other batch sizes. */
array gather_mm(array a, array b, std::optional<array> lhs_indices = {},
                std::optional<array> rhs_indices = {},
                bool sorted_indices = false, StreamOrDevice s = {});

/** For each [start, end) pair in segments (..., 2), a[:, start:end] @
 *  b[start:end, :] of a (M, K) and b (K, N), as MLX's segmented_mm: the
 *  result is (..., M, N). Bounds are clamped into [0, K]; an empty segment
 *  gives zeros. Real floating dtypes only. */
array segmented_mm(array a, array b, const array& segments,
                   StreamOrDevice s = {});

/** Sum product over the last axes of a and b (a product when one is 0-d). */
array inner(const array& a, const array& b, StreamOrDevice s = {});

/** Outer product of the flattened a and b. */
array outer(const array& a, const array& b, StreamOrDevice s = {});

/** The Kronecker product: the block matrix (any rank) of a's elements times
 *  b; the shorter shape is padded with leading 1s. */
array kron(const array& a, const array& b, StreamOrDevice s = {});

/** sum(conj(a) * b) along axis, after broadcasting a and b. */
array vecdot(const array& a, const array& b, int axis = -1,
             StreamOrDevice s = {});

/** Contract the last `axis` axes of a with the first `axis` axes of b. */
array tensordot(const array& a, const array& b, int axis = 2,
                StreamOrDevice s = {});
/** Contract axes_a of a with axes_b of b, pairwise. */
array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s = {});

/** Einstein summation, e.g. "ij,jk->ik", "...ij,...jk", "ii->i". Implicit
 *  output (no "->") keeps the ellipsis dims and the labels seen once, in
 *  alphabetical order. Repeated labels within an operand take diagonals. */
array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s = {});

/** The contraction order a greedy search picks for einsum (pairs of
 *  positions in the shrinking operand list, results appended at its end)
 *  and a report of the naive and optimized costs, as mlx.core.einsum_path
 *  prints them. */
std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands);

namespace linalg {

/** Vector or matrix norm, as mlx.core.linalg.norm. Without axis and ord, the
 *  2-norm of the flattened array; with ord and no axis, a must be 1-d or 2-d.
 *  Vector ords: any number (inf, -inf, 0 counts nonzeros); matrix ords:
 *  1, -1, inf, -inf, 2, -2 (via SVD) and "fro", "nuc" (via SVD). */
array norm(const array& a, double ord,
           const std::optional<std::vector<int>>& axis = std::nullopt,
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, double ord, int axis, bool keepdims = false,
           StreamOrDevice s = {});
array norm(const array& a, const std::string& ord,
           const std::optional<std::vector<int>>& axis = std::nullopt,
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, const std::string& ord, int axis,
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a,
           const std::optional<std::vector<int>>& axis = std::nullopt,
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, int axis, bool keepdims = false,
           StreamOrDevice s = {});

/** Inverse of square matrices (float32/float64, batched over leading dims).
 *  A singular matrix raises std::runtime_error when evaluated. */
array inv(const array& a, StreamOrDevice s = {});

/** Cholesky factor of symmetric positive definite matrices: L with
 *  a = L L^T read from the lower triangle, or with upper U (a = U^T U) read
 *  from the upper triangle. A matrix that is not positive definite raises
 *  std::runtime_error when evaluated. */
array cholesky(const array& a, bool upper = false, StreamOrDevice s = {});

/** Reduced QR: Q (..., M, K) with orthonormal columns, R (..., K, N) upper
 *  triangular, K = min(M, N). */
std::pair<array, array> qr(const array& a, StreamOrDevice s = {});

/** {U, S, Vt} with a = U[..., :, :K] diag(S) Vt[..., :K, :] (full U and Vt),
 *  or {S} when compute_uv is false. */
std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s = {});
std::vector<array> svd(const array& a, StreamOrDevice s = {});

/** x with a @ x = b. A 1-d b is one right-hand side (broadcast over a's
 *  batch); otherwise b is (..., N, R) with batch dims broadcast against a's.
 *  A singular matrix raises std::runtime_error when evaluated. */
array solve(const array& a, const array& b, StreamOrDevice s = {});

/** Inverse of triangular matrices: the lower triangle is read (the upper
 *  with upper set) and the other triangle of the result is zero. A zero on
 *  the diagonal raises std::runtime_error when evaluated. */
array tri_inv(const array& a, bool upper = false, StreamOrDevice s = {});

/** Inverse of A = L L^T (or U^T U with upper) given its Cholesky factor. */
array cholesky_inv(const array& l, bool upper = false, StreamOrDevice s = {});

/** x with a @ x = b for triangular a (lower, or upper when upper is set;
 *  the other triangle is not read). b broadcasts as in solve. */
array solve_triangular(const array& a, const array& b, bool upper = false,
                       StreamOrDevice s = {});

/** Compact LU factorization with partial pivoting: {LU, pivots} with the
 *  unit lower factor below LU's diagonal, the upper factor on and above it,
 *  and pivots (uint32, 0-based) saying row i was swapped with pivots[i]. */
std::pair<array, array> lu_factor(const array& a, StreamOrDevice s = {});

/** {p, L, U} with a = L[p] @ U: p (uint32) the row of L @ U that each row
 *  of a is, L unit lower (..., M, K), U upper (..., K, N). */
std::vector<array> lu(const array& a, StreamOrDevice s = {});

/** Determinant of square matrices (integers are taken as float32). */
array det(const array& a, StreamOrDevice s = {});

/** {sign, log|det|} of square matrices; a singular matrix gives
 *  {0, -inf}. */
std::pair<array, array> slogdet(const array& a, StreamOrDevice s = {});

/** {eigenvalues ascending, eigenvectors as columns} of symmetric matrices
 *  read from the lower ("L") or upper ("U") triangle. */
std::pair<array, array> eigh(const array& a, const std::string& uplo = "L",
                             StreamOrDevice s = {});
/** Eigenvalues (ascending) of symmetric matrices, as eigh. */
array eigvalsh(const array& a, const std::string& uplo = "L",
               StreamOrDevice s = {});

/** {eigenvalues, unit right eigenvectors as columns} of general square
 *  matrices, complex64 even when all are real (as MLX). */
std::pair<array, array> eig(const array& a, StreamOrDevice s = {});
/** Eigenvalues of general square matrices, complex64. */
array eigvals(const array& a, StreamOrDevice s = {});

/** Moore-Penrose pseudo-inverse (..., N, M) via the SVD; singular values
 *  below max(M, N) * eps * the largest are treated as zero. */
array pinv(const array& a, StreamOrDevice s = {});

/** Cross product of 3-vectors (or 2-vectors, taken with a zero third
 *  component) along axis; a and b broadcast. */
array cross(const array& a, const array& b, int axis = -1,
            StreamOrDevice s = {});

} // namespace linalg

} // namespace kiln
