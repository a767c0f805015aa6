// Primitives that change shape or layout. Most are views: their outputs
// share the input's buffer with new strides, and copy only when no strides
// can express the result.
#pragma once

#include <typeinfo>

#include "kiln/core/primitive.h"
#include "kiln/primitives/view_eval.h"

namespace kiln {

// An implicit broadcast is one an elementwise op made to line its operands
// up; compile's shapeless replay recomputes its shape from the consumer's
// other operands. An explicit broadcast_to keeps the shape it was given.
class Broadcast : public UnaryPrimitive {
 public:
  Broadcast(Stream s, Shape shape, bool implicit = false)
      : UnaryPrimitive(s), shape_(std::move(shape)), implicit_(implicit) {}
  const char* name() const override { return "Broadcast"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  FusionKind fusion_kind() const override { return FusionKind::broadcast; }
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const Shape& shape() const { return shape_; }
  bool implicit() const { return implicit_; }

 private:
  const Shape shape_;
  const bool implicit_;
};

/** inputs[0] broadcast to the shape of inputs[1], whose data is not read:
 *  broadcast_to(a, like.shape()) as shapeless compile traces it
 *  (detail::broadcast_like), so that the shape follows `like` on replay. */
class BroadcastLike : public UnaryPrimitive {
 public:
  /** keep = 0: the first input broadcast to the second's shape. keep > 0:
   *  the first input's leading axes broadcast against the second's leading
   *  axes, its last `keep` axes as they are (a product's batch axes). */
  explicit BroadcastLike(Stream s, int keep = 0)
      : UnaryPrimitive(s), keep_(keep) {}
  const char* name() const override { return "BroadcastLike"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const BroadcastLike*>(&other);
    return o && o->keep_ == keep_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  int keep() const { return keep_; }

 private:
  int keep_;
};

/** The input viewed (or copied) with shape(). Under shapeless compile a
 *  reshape written with a -1 infers it again from the new size (as MLX);
 *  one to a fixed shape only replays on an input of its traced shape. A
 *  second input, whose data is not read, gives the shape instead: the
 *  gradient of a reshape traced for shapeless compile takes its primal's. */
class Reshape : public UnaryPrimitive {
 public:
  Reshape(Stream s, Shape shape, Shape requested, Shape in_shape)
      : UnaryPrimitive(s),
        shape_(std::move(shape)),
        requested_(std::move(requested)),
        in_shape_(std::move(in_shape)) {}
  const char* name() const override { return "Reshape"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const Shape& shape() const { return shape_; }
  const Shape& requested() const { return requested_; }

 private:
  const Shape shape_;     // at trace time
  const Shape requested_; // as the op was given it (one entry may be -1)
  const Shape in_shape_;  // the input's at trace time
};

/** What Squeeze and ExpandDims share: sorted, non-negative axes, and
 *  equivalence of the same class with the same axes. Both are views whose
 *  output shape follows the input's, so shapeless traces (of reductions
 *  without keepdims, for one) replay at new shapes. */
class AxesView : public UnaryPrimitive {
 public:
  AxesView(Stream s, std::vector<int> axes)
      : UnaryPrimitive(s), axes_(std::move(axes)) {}
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const AxesView*>(&other);
    return o && typeid(*o) == typeid(*this) && o->axes_ == axes_;
  }
  const std::vector<int>& axes() const { return axes_; }

 protected:
  const std::vector<int> axes_;
};

/** Removes the size-1 axes at axes of the input. */
class Squeeze : public AxesView {
 public:
  using AxesView::AxesView;
  const char* name() const override { return "Squeeze"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

/** Inserts size-1 axes at the axes of the output. */
class ExpandDims : public AxesView {
 public:
  using AxesView::AxesView;
  const char* name() const override { return "ExpandDims"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

class Transpose : public UnaryPrimitive {
 public:
  Transpose(Stream s, std::vector<int> axes)
      : UnaryPrimitive(s), axes_(std::move(axes)) {}
  const char* name() const override { return "Transpose"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  const std::vector<int> axes_;
};

/** A row-major array (a copy unless the input already is one; column-major
 *  inputs pass through too when allowed). */
class Contiguous : public UnaryPrimitive {
 public:
  Contiguous(Stream s, bool allow_col_major)
      : UnaryPrimitive(s), allow_col_major_(allow_col_major) {}
  const char* name() const override { return "Contiguous"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Contiguous*>(&other);
    return o && o->allow_col_major_ == allow_col_major_;
  }
  bool allow_col_major() const { return allow_col_major_; }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  const bool allow_col_major_;
};

/** The identity, sharing the input's buffer. Transformations wrap their
 *  inputs in it to give them a fresh identity. */
class Copy : public UnaryPrimitive {
 public:
  explicit Copy(Stream s) : UnaryPrimitive(s) {}
  const char* name() const override { return "Copy"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return typeid(other) == typeid(Copy);
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
};

/** Strides that give a row-major array of in's data the new shape without a
 *  copy, or empty when none exist (NumPy's no-copy reshape rule). */
Strides reshape_strides(const array& in, const Shape& shape);

} // namespace kiln

namespace kiln {

/** The same bytes read as another dtype (the last axis scales with the
 *  itemsize ratio). */
class View : public UnaryPrimitive {
 public:
  View(Stream s, Dtype dtype) : UnaryPrimitive(s), dtype_(dtype) {}
  const char* name() const override { return "View"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const View*>(&other);
    return o && o->dtype_ == dtype_;
  }
  Dtype dtype() const { return dtype_; }

 private:
  const Dtype dtype_;
};

} // namespace kiln
