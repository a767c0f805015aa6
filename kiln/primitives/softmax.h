// Softmax over the last axis. The op moves a single other axis last (a view)
// and composes multi-axis softmax from reductions.
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

} // namespace kiln
