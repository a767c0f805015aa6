// Primitives of the random family. Besides the Threefry bits, two kernels
// exist only so that draws match MLX's bit for bit: MLX's float32 erf/erfinv
// approximations, and a permutation by sorted random keys.
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

/** Random bits from Threefry-2x32 keys (uint32, shape (..., 2); one key
 *  unless vmap batched them): `width` bytes per output element (1, 2 or 4),
 *  laid out as MLX does, each key filling an equal consecutive share. */
class RandomBits : public UnaryPrimitive {
 public:
  RandomBits(Stream s, Shape shape, int width)
      : UnaryPrimitive(s), shape_(std::move(shape)), width_(width) {}
  const char* name() const override { return "RandomBits"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const RandomBits*>(&other);
    return o && o->shape_ == shape_ && o->width_ == width_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return {shape_};
  }
  const Shape& shape() const { return shape_; }
  int width() const { return width_; }

 private:
  const Shape shape_;
  const int width_;
};

/** erf (or erfinv when inverse) computed in float32 with MLX's polynomial
 *  approximations, output in the input's floating dtype. The erf and erfinv
 *  ops stay accurate; only the samplers use this, to reproduce MLX's draws. */
class Float32Erf : public UnaryPrimitive {
 public:
  Float32Erf(Stream s, bool inverse) : UnaryPrimitive(s), inverse_(inverse) {}
  const char* name() const override { return "Float32Erf"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Float32Erf*>(&other);
    return o && o->inverse_ == inverse_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  bool inverse() const { return inverse_; }

 private:
  const bool inverse_;
};

} // namespace kiln
