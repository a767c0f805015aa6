// Slicing and joining primitives. Slice, Split, DynamicSlice and AsStrided
// are views (they share the input's buffer); the updates and Concatenate
// write a new buffer, or the donated source's.
#pragma once

#include <utility>

#include "kiln/core/primitive.h"
#include "kiln/primitives/view_eval.h"

namespace kiln {

/** A strided window. start/stop are kept as the op was given them (negative
 *  values count from the end, slice_end runs through the end) and are
 *  normalized against the input's shape when evaluated, so under shapeless
 *  compile a window written relative to the end follows a new size. Strides
 *  are nonzero and possibly negative. */
class Slice : public UnaryPrimitive {
 public:
  Slice(Stream s, Shape start, Shape stop, Shape strides)
      : UnaryPrimitive(s),
        start_(std::move(start)),
        stop_(std::move(stop)),
        strides_(std::move(strides)) {}
  const char* name() const override { return "Slice"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  const Shape start_;
  const Shape stop_;
  const Shape strides_;
};

/** The input cut along axis into pieces, one output (a view) each. The cut
 *  points are either the op's indices, absolute and normalized as slice
 *  bounds (so pieces may be empty, and unsorted indices make them overlap),
 *  or num_splits equal parts (then num_splits > 0 and indices are unused),
 *  which follow a new axis size under shapeless compile; or, for a Split
 *  made `like`, the extents along axis of the inputs after the first (one
 *  per piece, their data not read): the gradient of a concatenation traced
 *  for shapeless compile splits like its primals, so it follows their new
 *  extents on replay. */
class Split : public Primitive {
 public:
  Split(Stream s, Shape indices, int num_splits, int axis, bool like = false)
      : Primitive(s),
        indices_(std::move(indices)),
        num_splits_(num_splits),
        axis_(axis),
        like_(like) {}
  const char* name() const override { return "Split"; }
  KILN_VIEW_EVAL
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  /** [start, stop) of each piece along an axis of size n (not `like`). */
  std::vector<std::pair<int32_t, int32_t>> bounds(int32_t n) const;
  /** [start, stop) of each piece for these inputs (any Split). */
  std::vector<std::pair<int32_t, int32_t>> pieces(
      const std::vector<array>& inputs) const;
  const Shape& indices() const { return indices_; }
  int num_splits() const { return num_splits_; }
  int axis() const { return axis_; }
  bool like() const { return like_; }

 private:
  /** The gradient of input 0: the cotangents joined, or each written
   *  into zeros where pieces overlap or leave gaps. */
  array input_cotangent(const std::vector<array>& primals,
                        const std::vector<array>& cotangents);

  const Shape indices_;
  const int num_splits_;
  const int axis_;
  const bool like_;
};

/** A window of slice_size whose start along axes is read from an integer
 *  array at run time (negative starts wrap once, then clamp so the window
 *  fits). Inputs: a, start. */
class DynamicSlice : public UnaryPrimitive {
 public:
  DynamicSlice(Stream s, std::vector<int> axes, Shape slice_size)
      : UnaryPrimitive(s),
        axes_(std::move(axes)),
        slice_size_(std::move(slice_size)) {}
  const char* name() const override { return "DynamicSlice"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return {slice_size_};
  }
  const std::vector<int>& axes() const { return axes_; }
  const Shape& slice_size() const { return slice_size_; }

 private:
  const std::vector<int> axes_;
  const Shape slice_size_;
};

/** src with the window start:stop:strides (kept as Slice keeps them)
 *  replaced by update (already of the window's shape; its dtype is converted
 *  on write). Inputs: src, update. */
class SliceUpdate : public UnaryPrimitive {
 public:
  SliceUpdate(Stream s, Shape start, Shape stop, Shape strides)
      : UnaryPrimitive(s),
        start_(std::move(start)),
        stop_(std::move(stop)),
        strides_(std::move(strides)) {}
  const char* name() const override { return "SliceUpdate"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  const Shape start_;
  const Shape stop_;
  const Shape strides_;
};

/** src with a window of update's shape replaced, its start along axes read
 *  at run time (wrapped, then clamped as DynamicSlice). Inputs: src,
 *  update (same ndim as src), start. */
class DynamicSliceUpdate : public UnaryPrimitive {
 public:
  DynamicSliceUpdate(Stream s, std::vector<int> axes)
      : UnaryPrimitive(s), axes_(std::move(axes)) {}
  const char* name() const override { return "DynamicSliceUpdate"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  const std::vector<int>& axes() const { return axes_; }

 private:
  const std::vector<int> axes_;
};

/** Inputs joined along axis; each is converted to the output dtype. */
class Concatenate : public UnaryPrimitive {
 public:
  Concatenate(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  const char* name() const override { return "Concatenate"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  int axis() const { return axis_; }

 private:
  const int axis_;
};

/** A view of a row-major input with explicit shape, strides and offset (in
 *  elements); the op checks that every element stays inside the input. */
class AsStrided : public UnaryPrimitive {
 public:
  AsStrided(Stream s, Shape shape, Strides strides, size_t offset)
      : UnaryPrimitive(s),
        shape_(std::move(shape)),
        strides_(std::move(strides)),
        offset_(offset) {}
  const char* name() const override { return "AsStrided"; }
  KILN_VIEW_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  size_t offset() const { return offset_; }

 private:
  const Shape shape_;
  const Strides strides_;
  const size_t offset_;
};

/** A window's normalized start and its shape on an input of shape `in`. */
struct SliceWindow {
  Shape start;
  Shape shape;
};
SliceWindow slice_window(const Shape& in, const Shape& start,
                         const Shape& stop, const Shape& strides);

/** Where the window start:stop:steps lies in an array of `shape` laid out
 *  with `strides` (elements): its own strides (the array's scaled by the
 *  steps) and the element offset of its first element. */
struct WindowPlace {
  Strides strides;
  int64_t offset = 0;
};
WindowPlace window_place(const Shape& shape, const Strides& strides,
                         const Shape& start, const Shape& stop,
                         const Shape& steps);

/** Number of elements of start:stop:step (normalized). */
int32_t slice_length(int32_t start, int32_t stop, int32_t step);

/** NumPy's normalization of start/stop along one axis of size n: negative
 *  values count from the end, then both are clamped into range. */
void normalize_slice_bounds(int32_t n, int32_t& start, int32_t& stop,
                            int32_t step);

} // namespace kiln
