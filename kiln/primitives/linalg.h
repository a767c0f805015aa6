// Matrix products and LAPACK-backed factorizations. The ops broadcast batch
// dimensions and cast to one dtype, so kernels see operands of equal batch
// shape (possibly stride-0 views) and a single inexact dtype. Every class has
// vjp, jvp and vmap rules (linalg_grads.cpp, factorization_grads.cpp); their
// limits are noted on each class.
#pragma once

#include <string>
#include <typeinfo>

#include "kiln/core/primitive.h"

namespace kiln {

/** Raises std::runtime_error for matrix `batch` of `nbatch` that a
 *  factorization or solve could not handle (a singular matrix, one not
 *  positive definite, no convergence): "[op] what (matrix i of the
 *  batch)." Every backend raises with it. */
[[noreturn]] void linalg_failure(const char* op, size_t batch, size_t nbatch,
                                 const std::string& what);

/** linalg_failure's reasons for LAPACK's (and cuSOLVER's) positive status
 *  `info`, worded alike by every backend: getrf's zero pivot, potrf's
 *  leading minor, trtri's zero diagonal entry. */
std::string singular_pivot_reason(int info);
std::string not_positive_definite_reason(int info);
std::string zero_diagonal_reason(int info);

/** out[..., M, N] = a[..., M, K] @ b[..., K, N]; a and b have the same batch
 *  shape (broadcast views allowed). */
class Matmul : public UnaryPrimitive {
 public:
  explicit Matmul(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "Matmul"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const Matmul*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

/** out = alpha * (a @ b) + beta * c, inputs {c, a, b}; a and b as Matmul.
 *  The bias rule: when c is a vector over the last axis (c's size is N and
 *  every other dimension is 1), the op passes it as a 1-d array of length N,
 *  never broadcast, so a backend can use a stride-1 bias in a GEMM epilogue
 *  (cuBLASLt's BIAS epilogue) and compile keeps seeing a vector. Any other c
 *  arrives broadcast (a view) to the full output shape. */
class AddMM : public UnaryPrimitive {
 public:
  AddMM(Stream s, float alpha, float beta)
      : UnaryPrimitive(s), alpha_(alpha), beta_(beta) {}
  const char* name() const override { return "AddMM"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const AddMM*>(&other);
    return o && o->alpha_ == alpha_ && o->beta_ == beta_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  float alpha() const { return alpha_; }
  float beta() const { return beta_; }

 private:
  const float alpha_;
  const float beta_;
};

/** out[i, M, N] = a[lhs[i]] @ b[rhs[i]] for inputs {a (A, M, K),
 *  b (B, K, N), lhs, rhs}: uint32 index arrays of one shape (broadcast
 *  views allowed), which gives out's leading dimensions. An index is read
 *  as int32 (the op's cast keeps a negative one's bits), counted from the
 *  end when negative, then clamped into its batch. rhs_sorted is the
 *  caller's hint that rhs is sorted. The gradient for b sorts the picks by
 *  matrix and sums each matrix's picks in one SegmentedMM over their rows
 *  (memory: the gathered rows, not a K x N product per pick); vmap folds a
 *  mapped operand's batch into its flat batch. */
class GatherMM : public UnaryPrimitive {
 public:
  GatherMM(Stream s, bool rhs_sorted)
      : UnaryPrimitive(s), rhs_sorted_(rhs_sorted) {}
  const char* name() const override { return "GatherMM"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const GatherMM*>(&other);
    return o && o->rhs_sorted_ == rhs_sorted_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool rhs_sorted() const { return rhs_sorted_; }
  /** The matrix of n that index (an input's uint32 value) picks. */
  static int64_t pick(uint32_t index, int64_t n) {
    int64_t i = static_cast<int32_t>(index);
    if (i < 0) i += n;
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
  }

 private:
  const bool rhs_sorted_;
};

/** out[s] = a[:, start_s:end_s] @ b[start_s:end_s, :] for inputs {a (M, K),
 *  b (K, N), segments (S, 2) uint32}: each bound read as int32 and clamped
 *  into [0, K], a segment with end <= start giving zeros. vjp sums each
 *  segment's products masked to its columns (memory S x M x K, so it is
 *  for modest S); jvp and vmap are exact. */
class SegmentedMM : public UnaryPrimitive {
 public:
  explicit SegmentedMM(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "SegmentedMM"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const SegmentedMM*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  /** Segment s's bounds [start, end) within k, as read from its two raw
   *  uint32 values. */
  static std::pair<int64_t, int64_t> bounds(uint32_t start, uint32_t end,
                                            int64_t k) {
    auto clamp = [k](uint32_t v) {
      int64_t i = static_cast<int32_t>(v);
      return i < 0 ? int64_t(0) : (i > k ? k : i);
    };
    int64_t a = clamp(start), b = clamp(end);
    return {a, b < a ? a : b};
  }
};

/** Inverse of each square matrix over the last two axes; a singular matrix
 *  raises std::runtime_error at evaluation. d(A^-1) = -A^-1 dA A^-1. */
class Inverse : public UnaryPrimitive {
 public:
  explicit Inverse(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "Inverse"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const Inverse*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
};

/** Shared by the primitives that read one triangle (lower, or upper when
 *  upper is set) of square matrices and keep their shape. */
class TrianglePrimitive : public UnaryPrimitive {
 public:
  TrianglePrimitive(Stream s, bool upper) : UnaryPrimitive(s), upper_(upper) {}
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const TrianglePrimitive*>(&other);
    return o && typeid(*this) == typeid(other) && o->upper_ == upper_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  bool upper() const { return upper_; }

 protected:
  const bool upper_;
};

/** Cholesky factor L (a = L L^T) read from the lower triangle, or with
 *  upper U (a = U^T U) read from the upper triangle, as MLX; a matrix that
 *  is not positive definite raises at evaluation.
 *  Gradients are those of the function as computed: an entry of the triangle
 *  that is read stands for itself and its mirror image, and the other
 *  triangle gets a zero cotangent (JAX and PyTorch instead return the
 *  symmetrized gradient; both agree on symmetric perturbations). */
class Cholesky : public TrianglePrimitive {
 public:
  using TrianglePrimitive::TrianglePrimitive;
  const char* name() const override { return "Cholesky"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
};

/** Reduced QR: outputs Q (..., M, K) and R (..., K, N), K = min(M, N).
 *  Gradients need the leading K x K block of R invertible (a of full rank
 *  with its first K columns independent); otherwise they are not finite. */
class QRF : public Primitive {
 public:
  explicit QRF(Stream s) : Primitive(s) {}
  const char* name() const override { return "QRF"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const QRF*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

/** Full SVD: outputs U (..., M, M), S (..., K), Vt (..., N, N); only S when
 *  compute_uv is false. Singular values are in descending order.
 *  Gradients: S's (dS = diag(U_k^T dA V_k)) is finite for any input; where
 *  singular values repeat it depends on the basis LAPACK picked, except for
 *  symmetric functions of them (sums, norms). Those of U and Vt hold for
 *  distinct nonzero singular values: with repeated ones the singular
 *  vectors are not unique and the result is not finite (inf/NaN), and a
 *  zero singular value of a non-square matrix likewise. Each pair
 *  (u_i, v_i) is differentiated with the sign LAPACK picked. The columns of
 *  the full U (or rows of Vt) beyond K span a complement that is unique
 *  only up to rotation; they are differentiated as turning least while
 *  staying orthogonal (dU_c = -U_k dU_k^T U_c), so functions of their span
 *  (a projector U_c U_c^T) get exact gradients. */
class SVD : public Primitive {
 public:
  SVD(Stream s, bool compute_uv) : Primitive(s), compute_uv_(compute_uv) {}
  const char* name() const override { return "SVD"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const SVD*>(&other);
    return o && o->compute_uv_ == compute_uv_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool compute_uv() const { return compute_uv_; }

 private:
  const bool compute_uv_;
};

/** x with a @ x = b for a (..., N, N) and b (..., N, R) of equal batch
 *  shape; a singular matrix raises at evaluation. db = A^-T dx and
 *  dA = -db x^T. */
class Solve : public UnaryPrimitive {
 public:
  explicit Solve(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "Solve"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const Solve*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[1].shape()};
  }
};

/** Inverse of triangular matrices (lower, or upper when upper is set);
 *  only that triangle is read and the other triangle of the result is
 *  zero. A zero on the diagonal raises at evaluation. The gradient is that
 *  of the triangle read: dX = -X dA X with dA masked to the triangle. */
class TriangularInverse : public TrianglePrimitive {
 public:
  using TrianglePrimitive::TrianglePrimitive;
  const char* name() const override { return "TriangularInverse"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
};

/** LU factorization with partial pivoting of (..., M, N) matrices, as
 *  LAPACK's getrf: outputs LU (..., M, N) holding the unit lower factor
 *  below the diagonal and the upper factor on and above it, pivots
 *  (..., K) uint32 (row i was swapped with row pivots[i], 0-based), and the
 *  row order perm (..., M) uint32 with a[i] = (L U)[perm[i]]. A singular
 *  matrix is factored (a zero on U's diagonal), not rejected.
 *  Gradients hold the pivoting fixed: with B = a[order] = L U and its
 *  square part B1 = L1 U1, F = L1^-1 dB1 U1^-1, dL1 = L1 tril(F, -1) and
 *  dU1 = triu(F) U1; extra rows or columns follow from B2 = L2 U1 or
 *  B2 = L1 U2. They need U1 invertible. */
class LUF : public Primitive {
 public:
  explicit LUF(Stream s) : Primitive(s) {}
  const char* name() const override { return "LUF"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const LUF*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

/** Eigenvalues (ascending, (..., N)) and, when vectors is set, orthonormal
 *  eigenvectors as the columns of (..., N, N), of symmetric matrices read
 *  from the lower (uplo 'L') or upper ('U') triangle. Gradients, for
 *  distinct eigenvalues (the vectors' are not finite otherwise): with
 *  P = V^T dS V, dw = diag(P) and dV = V (F o P), F_ij = 1 / (w_j - w_i);
 *  an entry of the triangle read stands for itself and its mirror image,
 *  as in Cholesky. */
class Eigh : public Primitive {
 public:
  Eigh(Stream s, char uplo, bool vectors)
      : Primitive(s), uplo_(uplo), vectors_(vectors) {}
  const char* name() const override { return "Eigh"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Eigh*>(&other);
    return o && o->uplo_ == uplo_ && o->vectors_ == vectors_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  char uplo() const { return uplo_; }
  bool vectors() const { return vectors_; }

 private:
  const char uplo_;
  const bool vectors_;
};

/** Eigenvalues (..., N) and, when vectors is set, right eigenvectors of
 *  unit norm as the columns of (..., N, N), of general real matrices; both
 *  complex64 whatever the input's precision, as MLX. Not differentiable
 *  (as MLX); vmap is supported. */
class Eig : public Primitive {
 public:
  Eig(Stream s, bool vectors) : Primitive(s), vectors_(vectors) {}
  const char* name() const override { return "Eig"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Eig*>(&other);
    return o && o->vectors_ == vectors_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool vectors() const { return vectors_; }

 private:
  const bool vectors_;
};

} // namespace kiln
