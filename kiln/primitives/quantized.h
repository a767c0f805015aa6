// The CPU's quantization primitives (the ops make them on CPU streams;
// elsewhere, and for their transformations, the graphs of ops they stand
// for, their fallbacks): Quantize, and QuantizedMatmul, x @ dequantize(w).T
// read straight from the packed codes.
#pragma once

#include "kiln/primitives/fast.h"

namespace kiln::fast {

/** Inputs: x (..., K) row-major, w (N, K * bits / 32) uint32, scales and
 *  biases (N, K / group_size) of x's dtype. Output (..., N), x's dtype.
 *  Per output: the sum over groups of scale * (x . codes) + bias * sum(x),
 *  in float32. */
class QuantizedMatmul : public Custom {
 public:
  QuantizedMatmul(Stream s, Fallback f, int group_size, int bits)
      : Custom(s, std::move(f)), group_size_(group_size), bits_(bits) {}
  const char* name() const override { return "QuantizedMatmul"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const QuantizedMatmul*>(&other);
    return o && o->group_size_ == group_size_ && o->bits_ == bits_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape s = in[0].shape();
    s.back() = in[1].shape(0);
    return {s};
  }

 private:
  int group_size_, bits_;
};

/** Input: w (..., N) row-major, float32, float16 or bfloat16. Outputs: the
 *  packed codes (..., N * bits / 32) uint32, scales and biases
 *  (..., N / group_size) of w's dtype, as kiln::quantize defines them
 *  (float32 arithmetic, the same operations as the graph). */
class Quantize : public Custom {
 public:
  Quantize(Stream s, Fallback f, int group_size, int bits)
      : Custom(s, std::move(f)), group_size_(group_size), bits_(bits) {}
  const char* name() const override { return "Quantize"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Quantize*>(&other);
    return o && o->group_size_ == group_size_ && o->bits_ == bits_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape q = in[0].shape(), p = in[0].shape();
    q.back() = q.back() * bits_ / 32;
    p.back() = p.back() / group_size_;
    return {q, p, p};
  }

 private:
  int group_size_, bits_;
};

} // namespace kiln::fast
