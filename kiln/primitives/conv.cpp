#include "kiln/primitives/conv.h"

namespace kiln {

bool Convolution::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Convolution*>(&other);
  return o && o->stride_ == stride_ && o->padding_lo_ == padding_lo_ &&
         o->padding_hi_ == padding_hi_ &&
         o->kernel_dilation_ == kernel_dilation_ &&
         o->input_dilation_ == input_dilation_ && o->groups_ == groups_ &&
         o->flip_ == flip_;
}

Shape conv_output_shape(const Shape& in, const Shape& w,
                        const std::vector<int>& stride,
                        const std::vector<int>& padding_lo,
                        const std::vector<int>& padding_hi,
                        const std::vector<int>& kernel_dilation,
                        const std::vector<int>& input_dilation) {
  Shape out{in[0]};
  for (size_t d = 0; d + 2 < in.size(); ++d) {
    int64_t len = in[d + 1];
    int64_t virt = len == 0 ? 0 : (len - 1) * input_dilation[d] + 1;
    int64_t padded = virt + padding_lo[d] + padding_hi[d];
    int64_t kernel = int64_t(w[d + 1] - 1) * kernel_dilation[d] + 1;
    if (padded < kernel) return {};
    out.push_back(static_cast<int>((padded - kernel) / stride[d] + 1));
  }
  out.push_back(w[0]);
  return out;
}

std::vector<Shape> Convolution::output_shapes(
    const std::vector<array>& inputs) {
  return {conv_output_shape(inputs[0].shape(), inputs[1].shape(), stride_,
                            padding_lo_, padding_hi_, kernel_dilation_,
                            input_dilation_)};
}

} // namespace kiln
