// Softmax and logsumexp over the last axis. The ops move a single other axis
// last (a view) and compose several axes from reductions.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

class Softmax : public UnaryPrimitive {
 public:
  Softmax(Stream s, bool precise) : UnaryPrimitive(s), precise_(precise) {}
  const char* name() const override { return "Softmax"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Softmax*>(&other);
    return o && o->precise_ == precise_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  bool precise() const { return precise_; }

 private:
  const bool precise_;
};

/** log(sum(exp(x))) over the last axis, in the compute type (float32 for
 *  float16/bfloat16) and rounded once: the row max (a NaN wins) is the
 *  shift, or 0 when it is infinite, so huge rows stay finite, a row holding
 *  +inf gives +inf and an all -inf row -inf. The output drops the last
 *  axis. */
class LogSumExp : public UnaryPrimitive {
 public:
  explicit LogSumExp(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "LogSumExp"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const LogSumExp*>(&other) != nullptr;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    const Shape& in = inputs[0].shape();
    return {Shape(in.begin(), in.end() - 1)};
  }
};

} // namespace kiln
