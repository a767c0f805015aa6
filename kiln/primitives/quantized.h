// The quantization primitives (the ops make them for the inputs their
// kernels take; otherwise, and for their transformations, the graphs of
// ops they stand for, their fallbacks): QuantizedMatmul, x @
// dequantize(w).T read straight from the packed codes, and Dequantize, on
// the CPU and the GPU; Quantize on the CPU; the microscaling modes'
// DequantizeFp and QuantizedMatmulFp, on the CPU and the GPU.
#pragma once

#include <typeinfo>

#include "kiln/primitives/fast.h"

namespace kiln::fast {

/** What both share: the group size and bit width, and equivalence of the
 *  same class with the same two. */
class QuantizedCustom : public Custom {
 public:
  QuantizedCustom(Stream s, Fallback f, int group_size, int bits)
      : Custom(s, std::move(f)), group_size_(group_size), bits_(bits) {}
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const QuantizedCustom*>(&other);
    return o && typeid(*o) == typeid(*this) &&
           o->group_size_ == group_size_ && o->bits_ == bits_;
  }

  int group_size() const { return group_size_; }
  int bits() const { return bits_; }

 protected:
  const int group_size_, bits_;
};

/** Inputs: x (..., K) row-major, w (N, K * bits / 32) uint32, scales and
 *  biases (N, K / group_size) of x's dtype; or a batch of them, w (B, N,
 *  K * bits / 32) with x (B, M, K), one product per matrix; or, with a
 *  fifth input, uint32 indices (P,) picking for each x (P, M, K) its
 *  matrix of the batch (GatherMM::pick's rule; gather_qmm's picks read in
 *  place). Output (..., N), x's dtype. Per output: the sum over groups of
 *  scale * (x . codes) + bias * sum(x), in float32. */
class QuantizedMatmul : public QuantizedCustom {
 public:
  using QuantizedCustom::QuantizedCustom;
  /** The most rows of x per pick the indexed form takes: the GPU's
   *  matvec reads the codes for up to this many rows, and gather_qmm
   *  takes the picks' codes for more. */
  static constexpr int64_t max_picked_rows = 16;
  const char* name() const override { return "QuantizedMatmul"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape s = in[0].shape();
    s.back() = in[1].shape(-2);
    return {s};
  }
};

/** Inputs: w (..., N * bits / 32) uint32 row-major, scales and biases
 *  (..., N / group_size) row-major of one float type. Output (..., N) of
 *  the dtype given: code * scale + bias in the scales' type, each step
 *  rounded to it (the graph's operations, so the same bits), then cast. */
class Dequantize : public QuantizedCustom {
 public:
  using QuantizedCustom::QuantizedCustom;
  const char* name() const override { return "Dequantize"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape s = in[0].shape();
    s.back() = s.back() * 32 / bits_;
    return {s};
  }
};

/** The microscaling modes' dequantize (group_size and bits name the
 *  mode: 32/4 mxfp4, 32/8 mxfp8, 16/4 nvfp4). Inputs: w (...,
 *  N * bits / 32) uint32 row-major, scales (..., N / group_size) uint8
 *  row-major (e8m0, or e4m3 for nvfp4), and with nvfp4's global scale a
 *  float32 scalar factor g / 2688. Output (..., N) of the dtype given:
 *  code value * (scale * factor) in float32, then cast (the graph's
 *  operations in ops/quantized_fp.cpp, so the same bits). */
class DequantizeFp : public QuantizedCustom {
 public:
  using QuantizedCustom::QuantizedCustom;
  const char* name() const override { return "DequantizeFp"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape s = in[0].shape();
    s.back() = s.back() * 32 / bits_;
    return {s};
  }
};

/** The microscaling modes' x @ dequantize(w).T for a few rows of x, read
 *  from the codes (group_size and bits name the mode, as DequantizeFp's).
 *  Inputs: x (..., K) row-major of float32/float16/bfloat16, w (N, K *
 *  bits / 32) uint32 and scales (N, K / group_size) uint8, both
 *  row-major; or, with a fourth input, uint32 indices (P,) picking for
 *  each x (P, M, K) its matrix of w (E, N, K * bits / 32) and scales (E,
 *  N, K / group_size) (GatherMM::pick's rule; gather_qmm's picks read in
 *  place). Output (..., N), x's dtype: per output, the sum over groups of
 *  scale * (x . code values), in float32. */
class QuantizedMatmulFp : public QuantizedCustom {
 public:
  using QuantizedCustom::QuantizedCustom;
  const char* name() const override { return "QuantizedMatmulFp"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape s = in[0].shape();
    s.back() = in[1].shape(-2);
    return {s};
  }
};

/** Input: w (..., N) row-major, float32, float16 or bfloat16. Outputs: the
 *  packed codes (..., N * bits / 32) uint32, scales and biases
 *  (..., N / group_size) of w's dtype, as kiln::quantize defines them
 *  (float32 arithmetic, the same operations as the graph). */
class Quantize : public QuantizedCustom {
 public:
  using QuantizedCustom::QuantizedCustom;
  const char* name() const override { return "Quantize"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape q = in[0].shape(), p = in[0].shape();
    q.back() = q.back() * bits_ / 32;
    p.back() = p.back() / group_size_;
    return {q, p, p};
  }
};

} // namespace kiln::fast
