// Convolution: channels-last cross-correlation with strides, padding, kernel
// and input dilation, groups and an optional kernel flip (MLX's
// conv_general). Transposed convolutions are this with input dilation.
#pragma once

#include "kiln/core/primitive.h"
#include "kiln/primitives/fast.h"

namespace kiln {

/** Inputs {input (N, spatial..., C_in), weight (C_out, K..., C_in/groups)}
 *  of one floating dtype; output (N, out spatial..., C_out). Padding may be
 *  negative (it crops), as transposed convolutions and the gradients
 *  produce. Both gradients are Convolutions again (conv_grads.cpp); that of
 *  a flipped kernel reverses it with a slice. */
class Convolution : public UnaryPrimitive {
 public:
  Convolution(Stream s, std::vector<int> stride, std::vector<int> padding_lo,
              std::vector<int> padding_hi, std::vector<int> kernel_dilation,
              std::vector<int> input_dilation, int groups, bool flip)
      : UnaryPrimitive(s),
        stride_(std::move(stride)),
        padding_lo_(std::move(padding_lo)),
        padding_hi_(std::move(padding_hi)),
        kernel_dilation_(std::move(kernel_dilation)),
        input_dilation_(std::move(input_dilation)),
        groups_(groups),
        flip_(flip) {}
  const char* name() const override { return "Convolution"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

  const std::vector<int>& stride() const { return stride_; }
  const std::vector<int>& padding_lo() const { return padding_lo_; }
  const std::vector<int>& padding_hi() const { return padding_hi_; }
  const std::vector<int>& kernel_dilation() const { return kernel_dilation_; }
  const std::vector<int>& input_dilation() const { return input_dilation_; }
  int groups() const { return groups_; }
  bool flip() const { return flip_; }

 private:
  const std::vector<int> stride_, padding_lo_, padding_hi_;
  const std::vector<int> kernel_dilation_, input_dilation_;
  const int groups_;
  const bool flip_;
};

/** The weight gradient of a Convolution: inputs {the forward's input x
 *  (N, S..., C_in), the output's cotangent (N, O..., C_out)}, output the
 *  weight's shape (C_out, K..., C_in/groups); the forward's parameters.
 *  Its meaning (and every transformation of it) is the fallback, a
 *  Convolution of x with its batch and channel roles swapped and the
 *  cotangent as the kernel (conv_grads.cpp): a copy of x when there are
 *  groups, and a long kernel with a short output, which few kernels suit.
 *  Backends with a weight-gradient kernel (cuDNN's wgrad) read x and the
 *  cotangent as they are. */
class ConvolutionWeightGrad : public fast::Custom {
 public:
  ConvolutionWeightGrad(Stream s, fast::Fallback fallback,
                        std::shared_ptr<const Convolution> forward,
                        Shape weight_shape)
      : Custom(s, std::move(fallback)),
        forward_(std::move(forward)),
        weight_shape_(std::move(weight_shape)) {}
  const char* name() const override { return "ConvolutionWeightGrad"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const ConvolutionWeightGrad*>(&other);
    return o && o->forward_->is_equivalent(*forward_) &&
           o->weight_shape_ == weight_shape_;
  }
  /** The kernel's taps as recorded, its channels from x and the
   *  cotangent (a shapeless compile may change them). */
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    Shape shape = weight_shape_;
    shape.front() = in[1].shape(-1);
    shape.back() = in[0].shape(-1) / forward_->groups();
    return {shape};
  }
  /** The convolution whose weight gradient this is (its parameters). */
  const Convolution& forward() const { return *forward_; }

 private:
  const std::shared_ptr<const Convolution> forward_;
  const Shape weight_shape_;
};

/** Output shape of a convolution, or an empty Shape when some padded
 *  (input-dilated) spatial extent is smaller than the dilated kernel. */
Shape conv_output_shape(const Shape& in, const Shape& w,
                        const std::vector<int>& stride,
                        const std::vector<int>& padding_lo,
                        const std::vector<int>& padding_hi,
                        const std::vector<int>& kernel_dilation,
                        const std::vector<int>& input_dilation);

} // namespace kiln
