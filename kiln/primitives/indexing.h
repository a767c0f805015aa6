// Gather and scatter. Index values of any integer dtype wrap once when
// negative (index + dim); a gather clamps the start of each slice so it
// stays inside the source, and a scatter drops an update slice that would
// land outside the output, so no index value reads or writes out of bounds.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

/** Inputs: a, then one index array per entry of axes (all of one shape).
 *  out[i..., s...] = a[start(i) + s] where start(i) takes the index values
 *  along axes and 0 elsewhere; the output shape is the index shape followed
 *  by slice_sizes. */
class Gather : public UnaryPrimitive {
 public:
  /** src_shape: the source's shape when the gather is built. An axis that
   *  is not indexed and whose slice is the source's whole extent stays
   *  whole when a shapeless compile replays at a new extent (take() along
   *  one axis keeps every other axis entire). */
  Gather(Stream s, std::vector<int> axes, Shape slice_sizes,
         const Shape& src_shape);
  const char* name() const override { return "Gather"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const std::vector<int>& axes() const { return axes_; }
  /** The slice sizes as built. */
  const Shape& slice_sizes() const { return slice_sizes_; }
  /** The slice sizes for a source of shape src. */
  Shape slice_sizes(const Shape& src) const;

 private:
  const std::vector<int> axes_;
  const Shape slice_sizes_;
  std::vector<bool> whole_;
};

/** How a scatter combines an update with the value already there. */
enum class ScatterReduce { None, Sum, Prod, Max, Min };

/** Inputs: a, one index array per axis (all of one shape I), then updates
 *  of shape I + slice shape, in a's dtype. out starts as a; each update
 *  slice is combined into out at start(i). Later updates win for None. */
class Scatter : public UnaryPrimitive {
 public:
  Scatter(Stream s, ScatterReduce reduce, std::vector<int> axes)
      : UnaryPrimitive(s), reduce_(reduce), axes_(std::move(axes)) {}
  const char* name() const override;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  ScatterReduce reduce() const { return reduce_; }
  const std::vector<int>& axes() const { return axes_; }

 private:
  const ScatterReduce reduce_;
  const std::vector<int> axes_;
};

/** take_along_axis: inputs a and indices of the output's shape (a matches
 *  it on every other axis). out[..., j, ...] = a[..., idx[..., j, ...], ...]
 *  along axis, the index clamped into range. */
class GatherAxis : public UnaryPrimitive {
 public:
  GatherAxis(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  const char* name() const override { return "GatherAxis"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[1].shape()};
  }
  int axis() const { return axis_; }

 private:
  bool one_index_per_line(const array& a, const array& idx,
                          const array& cot) const;
  array picked_gradient(const array& a, const array& idx,
                        const array& cot) const;

  const int axis_;
};

/** put_along_axis: inputs a, indices and updates (both of one shape that
 *  matches a except along axis, updates in a's dtype). Out-of-range
 *  indices are skipped. */
class ScatterAxis : public UnaryPrimitive {
 public:
  ScatterAxis(Stream s, ScatterReduce reduce, int axis)
      : UnaryPrimitive(s), reduce_(reduce), axis_(axis) {}
  const char* name() const override;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  ScatterReduce reduce() const { return reduce_; }
  int axis() const { return axis_; }

 private:
  const ScatterReduce reduce_;
  const int axis_;
};

} // namespace kiln
