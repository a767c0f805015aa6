// Sorting along one axis. NaNs order after every other value (as NumPy);
// the arg variants return uint32 positions along the axis.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

class Sort : public UnaryPrimitive {
 public:
  Sort(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  const char* name() const override { return "Sort"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  int axis() const { return axis_; }

 private:
  const int axis_;
};

/** Stable: equal values keep their order. */
class ArgSort : public UnaryPrimitive {
 public:
  ArgSort(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  const char* name() const override { return "ArgSort"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  int axis() const { return axis_; }

 private:
  const int axis_;
};

/** Element kth (normalized, in [0, n)) lands where a sort would put it;
 *  smaller-or-equal values come before it, larger-or-equal after. */
class Partition : public UnaryPrimitive {
 public:
  Partition(Stream s, int kth, int axis)
      : UnaryPrimitive(s), kth_(kth), axis_(axis) {}
  const char* name() const override { return "Partition"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  int kth() const { return kth_; }
  int axis() const { return axis_; }

 private:
  const int kth_;
  const int axis_;
};

class ArgPartition : public UnaryPrimitive {
 public:
  ArgPartition(Stream s, int kth, int axis)
      : UnaryPrimitive(s), kth_(kth), axis_(axis) {}
  const char* name() const override { return "ArgPartition"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  int kth() const { return kth_; }
  int axis() const { return axis_; }

 private:
  const int kth_;
  const int axis_;
};

} // namespace kiln
