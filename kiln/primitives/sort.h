// Sorting along one axis. NaNs order after every other value (as NumPy);
// the arg variants return uint32 positions along the axis.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

/** What the sort primitives share: an axis, for partitions a kth, the
 *  input's shape, and equivalence of the same class with the same
 *  parameters. */
class AxisSortPrimitive : public UnaryPrimitive {
 public:
  AxisSortPrimitive(Stream s, int axis, int kth = -1)
      : UnaryPrimitive(s), axis_(axis), kth_(kth) {}
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const AxisSortPrimitive*>(&other);
    return o && typeid(*o) == typeid(*this) && o->axis_ == axis_ &&
           o->kth_ == kth_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  int axis() const { return axis_; }
  int kth() const { return kth_; }
  /** kth normalized for an axis of n elements. */
  int kth_of(int n) const { return kth_ < 0 ? kth_ + n : kth_; }

 protected:
  const int axis_;
  const int kth_;
};

// One class per primitive; only the name and the rules differ.
#define KILN_SORT_PRIMITIVE(Name)                                         \
  class Name : public AxisSortPrimitive {                                 \
   public:                                                                \
    using AxisSortPrimitive::AxisSortPrimitive;                           \
    const char* name() const override { return #Name; }                   \
    void eval_cpu(const std::vector<array>& inputs, array& out) override; \
    KILN_GPU_EVAL_UNARY                                                   \
    KILN_DECLARE_GRADS                                                    \
  };

KILN_SORT_PRIMITIVE(Sort)
/** Stable: equal values keep their order. */
KILN_SORT_PRIMITIVE(ArgSort)
/** Element kth lands where a sort would put it; smaller-or-equal values
 *  come before it, larger-or-equal after. kth is kept as given (negative
 *  counts from the end; kth_of normalizes it), so under shapeless compile a
 *  kth written from the end follows a new size. */
KILN_SORT_PRIMITIVE(Partition)
KILN_SORT_PRIMITIVE(ArgPartition)
#undef KILN_SORT_PRIMITIVE

/** Inputs: a 1-d sorted sequence and values of one dtype. For each value,
 *  the number of elements before it (left: strictly less; right: less or
 *  equal) in the NaN-last order, as uint32 shaped like the values. */
class SearchSorted : public Primitive {
 public:
  SearchSorted(Stream s, bool right) : Primitive(s), right_(right) {}
  const char* name() const override { return "SearchSorted"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const SearchSorted*>(&other);
    return o && o->right_ == right_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[1].shape()};
  }
  bool right() const { return right_; }

 private:
  const bool right_;
};

} // namespace kiln
