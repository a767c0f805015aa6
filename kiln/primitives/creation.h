// Primitives that create data from parameters alone.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

class Arange : public UnaryPrimitive {
 public:
  Arange(Stream s, double start, double stop, double step)
      : UnaryPrimitive(s), start_(start), stop_(stop), step_(step) {}
  const char* name() const override { return "Arange"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Arange*>(&other);
    return o && o->start_ == start_ && o->stop_ == stop_ && o->step_ == step_;
  }
  double start() const { return start_; }
  double step() const { return step_; }

 private:
  const double start_, stop_, step_;
};

} // namespace kiln
