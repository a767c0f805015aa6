// Reductions, arg-reductions and scans. The output of Reduce keeps the
// reduced axes with size 1; the op squeezes them unless keepdims.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

class Reduce : public UnaryPrimitive {
 public:
  enum Type { And, Or, Sum, Prod, Max, Min };
  Reduce(Stream s, Type type, std::vector<int> axes)
      : UnaryPrimitive(s), type_(type), axes_(std::move(axes)) {}
  const char* name() const override;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Reduce*>(&other);
    return o && o->type_ == type_ && o->axes_ == axes_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  Type type() const { return type_; }
  const std::vector<int>& axes() const { return axes_; }

 private:
  const Type type_;
  const std::vector<int> axes_;
};

/** The number of elements of the input over some axes, less ddof (not
 *  below 0), as a scalar of a float dtype: mean's and var's divisor. A node,
 *  not a constant, so that compile's shapeless replay counts the elements
 *  of the new shape. */
class NumberOfElements : public UnaryPrimitive {
 public:
  NumberOfElements(Stream s, std::vector<int> axes, int ddof, Dtype dtype)
      : UnaryPrimitive(s), axes_(std::move(axes)), ddof_(ddof), dtype_(dtype) {}
  const char* name() const override { return "NumberOfElements"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const NumberOfElements*>(&other);
    return o && o->axes_ == axes_ && o->ddof_ == ddof_ && o->dtype_ == dtype_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return {Shape{}};
  }
  /** The count for an input of this shape. */
  double count(const Shape& shape) const;
  const std::vector<int>& axes() const { return axes_; }
  int ddof() const { return ddof_; }
  Dtype count_dtype() const { return dtype_; }

 private:
  const std::vector<int> axes_; // normalized, increasing
  const int ddof_;
  const Dtype dtype_;
};

/** Index (uint32) of the first extreme value along axis; the axis is kept
 *  with size 1. */
class ArgReduce : public UnaryPrimitive {
 public:
  enum Type { ArgMin, ArgMax };
  ArgReduce(Stream s, Type type, int axis)
      : UnaryPrimitive(s), type_(type), axis_(axis) {}
  const char* name() const override {
    return type_ == ArgMax ? "ArgMax" : "ArgMin";
  }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const ArgReduce*>(&other);
    return o && o->type_ == type_ && o->axis_ == axis_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  Type type() const { return type_; }
  int axis() const { return axis_; }

 private:
  const Type type_;
  const int axis_;
};

class Scan : public UnaryPrimitive {
 public:
  // LogAddExp: the running log(sum(exp)), in floating point.
  enum Type { Sum, Prod, Max, Min, LogAddExp };
  Scan(Stream s, Type type, int axis, bool reverse, bool inclusive)
      : UnaryPrimitive(s),
        type_(type),
        axis_(axis),
        reverse_(reverse),
        inclusive_(inclusive) {}
  const char* name() const override;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Scan*>(&other);
    return o && o->type_ == type_ && o->axis_ == axis_ &&
           o->reverse_ == reverse_ && o->inclusive_ == inclusive_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  Type type() const { return type_; }
  int axis() const { return axis_; }
  bool reverse() const { return reverse_; }
  bool inclusive() const { return inclusive_; }

 private:
  const Type type_;
  const int axis_;
  const bool reverse_, inclusive_;
};

/** Dtype of a sum or product of dtype d: small integers widen to 32 bits,
 *  bool counts as int32. */
Dtype sum_dtype(Dtype d);

} // namespace kiln
