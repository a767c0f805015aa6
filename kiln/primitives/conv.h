// Convolution: channels-last cross-correlation with strides, padding, kernel
// and input dilation, groups and an optional kernel flip (MLX's
// conv_general). Transposed convolutions are this with input dilation.
#pragma once

#include "kiln/core/primitive.h"

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

/** Output shape of a convolution, or an empty Shape when some padded
 *  (input-dilated) spatial extent is smaller than the dilated kernel. */
Shape conv_output_shape(const Shape& in, const Shape& w,
                        const std::vector<int>& stride,
                        const std::vector<int>& padding_lo,
                        const std::vector<int>& padding_hi,
                        const std::vector<int>& kernel_dilation,
                        const std::vector<int>& input_dilation);

} // namespace kiln
