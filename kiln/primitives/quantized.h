// QuantizedMatmul: x @ dequantize(w).T read straight from the packed codes,
// for the CPU (the op makes it on CPU streams for 2-d weights; elsewhere,
// and for its gradients, the graph of dequantize and matmul, its fallback).
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

} // namespace kiln::fast
