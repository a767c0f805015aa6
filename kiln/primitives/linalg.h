// Matrix products and LAPACK-backed factorizations. The ops broadcast batch
// dimensions and cast to one dtype, so kernels see operands of equal batch
// shape (possibly stride-0 views) and a single inexact dtype.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

/** out[..., M, N] = a[..., M, K] @ b[..., K, N]; a and b have the same batch
 *  shape (broadcast views allowed). */
class Matmul : public UnaryPrimitive {
 public:
  explicit Matmul(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "Matmul"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
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

/** Inverse of each square matrix over the last two axes; a singular matrix
 *  raises std::runtime_error at evaluation. */
class Inverse : public UnaryPrimitive {
 public:
  explicit Inverse(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "Inverse"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const Inverse*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
};

/** Cholesky factor L (a = L L^T) read from the lower triangle, or with
 *  upper U (a = U^T U) read from the upper triangle, as MLX; a matrix that
 *  is not positive definite raises at evaluation. */
class Cholesky : public UnaryPrimitive {
 public:
  Cholesky(Stream s, bool upper) : UnaryPrimitive(s), upper_(upper) {}
  const char* name() const override { return "Cholesky"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Cholesky*>(&other);
    return o && o->upper_ == upper_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  bool upper() const { return upper_; }

 private:
  const bool upper_;
};

/** Reduced QR: outputs Q (..., M, K) and R (..., K, N), K = min(M, N). */
class QRF : public Primitive {
 public:
  explicit QRF(Stream s) : Primitive(s) {}
  const char* name() const override { return "QRF"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const QRF*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

/** Full SVD: outputs U (..., M, M), S (..., K), Vt (..., N, N); only S when
 *  compute_uv is false. Singular values are in descending order. */
class SVD : public Primitive {
 public:
  SVD(Stream s, bool compute_uv) : Primitive(s), compute_uv_(compute_uv) {}
  const char* name() const override { return "SVD"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
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
 *  shape; a singular matrix raises at evaluation. */
class Solve : public UnaryPrimitive {
 public:
  explicit Solve(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "Solve"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const Solve*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[1].shape()};
  }
};

} // namespace kiln
