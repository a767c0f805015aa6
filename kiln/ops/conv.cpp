#include "kiln/ops/conv.h"

#include "kiln/ops/elementwise.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/conv.h"

namespace kiln {

using detail::describe;
using detail::invalid;

namespace {

struct ConvParams {
  std::vector<int> stride, lo, hi, kernel_dilation, input_dilation;
};

std::string list_str(const std::vector<int>& v) {
  return detail::shape_str(Shape(v.begin(), v.end()));
}

// A per-axis parameter: empty gives the default, one value fills every axis.
std::vector<int> per_axis(const char* op, const char* what, std::vector<int> v,
                          size_t nd, int fallback) {
  if (v.empty()) return std::vector<int>(nd, fallback);
  if (v.size() == 1) return std::vector<int>(nd, v[0]);
  if (v.size() != nd) {
    invalid(op, std::string(what) + " " + list_str(v) +
                    " must have one value "
                    "per spatial axis (" +
                    std::to_string(nd) + ").");
  }
  return v;
}

void check_at_least(const char* op, const char* what, const std::vector<int>& v,
                    int lo) {
  for (int x : v) {
    if (x < lo) {
      invalid(op, std::string(what) + " must be " +
                      (lo == 0 ? "non-negative" : "positive") + ", got " +
                      list_str(v) + ".");
    }
  }
}

// Validates input and weight; the params are already per-axis.
array conv_impl(const char* op, array in, array w, const ConvParams& p,
                int groups, bool flip, StreamOrDevice s) {
  if (!is_floating_point(in.dtype()) || !is_floating_point(w.dtype())) {
    invalid(op, "only floating point types are supported, got " + describe(in) +
                    " and weight " + describe(w) + ".");
  }
  size_t nd = p.stride.size();
  if (in.ndim() != nd + 2) {
    invalid(op, "the input must be (N, spatial..., C_in) with " +
                    std::to_string(nd) + " spatial axes, got " + describe(in) +
                    ".");
  }
  if (w.ndim() != nd + 2) {
    invalid(op, "the weight must be (C_out, K..., C_in) with " +
                    std::to_string(nd) + " spatial axes, got " + describe(w) +
                    ".");
  }
  if (groups < 1) {
    invalid(op, "groups must be positive, got " + std::to_string(groups) + ".");
  }
  int c_in = in.shape(-1), c_out = w.shape(0);
  if (c_in % groups != 0 || c_out % groups != 0) {
    invalid(op, "input channels (" + describe(in) + ") and output channels (" +
                    describe(w) + ") must be divisible by groups = " +
                    std::to_string(groups) + ".");
  }
  if (w.shape(-1) * groups != c_in) {
    invalid(op, "channel mismatch: the input " + describe(in) + " has " +
                    std::to_string(c_in) + " channels but the weight " +
                    describe(w) + " expects " + std::to_string(w.shape(-1)) +
                    " x groups (" + std::to_string(groups) + ").");
  }
  check_at_least(op, "stride", p.stride, 1);
  check_at_least(op, "kernel dilation", p.kernel_dilation, 1);
  check_at_least(op, "input dilation", p.input_dilation, 1);
  for (size_t d = 0; d < nd; ++d) {
    if (w.shape(d + 1) < 1) {
      invalid(op,
              "the kernel must have a positive size on every spatial "
              "axis, got weight " +
                  describe(w) + ".");
    }
  }
  Shape out = conv_output_shape(in.shape(), w.shape(), p.stride, p.lo, p.hi,
                                p.kernel_dilation, p.input_dilation);
  if (out.empty()) {
    invalid(op, "the (dilated) kernel of " + describe(w) +
                    " is larger than the padded input " + describe(in) +
                    " (padding " + list_str(p.lo) + " / " + list_str(p.hi) +
                    ", dilation " + list_str(p.kernel_dilation) + ").");
  }
  Dtype dt = promote_types(in.dtype(), w.dtype());
  std::vector<array> inputs = {astype(in, dt, s), astype(w, dt, s)};
  auto prim = detail::placed<Convolution>(to_stream(s), inputs, p.stride, p.lo,
                                          p.hi, p.kernel_dilation,
                                          p.input_dilation, groups, flip);
  return array(out, dt, std::move(prim), std::move(inputs));
}

array forward(const char* op, const array& in, const array& w,
              std::vector<int> stride, std::vector<int> padding,
              std::vector<int> dilation, int groups, StreamOrDevice s) {
  check_at_least(op, "padding", padding, 0);
  size_t nd = stride.size();
  ConvParams p{stride, padding, padding, dilation, std::vector<int>(nd, 1)};
  return conv_impl(op, in, w, p, groups, false, s);
}

// A transposed convolution is a convolution of the stride-dilated input with
// the flipped kernel, padded so each input element reaches every output it
// contributed to in the forward convolution.
array transposed(const char* op, const array& in, const array& w,
                 std::vector<int> stride, std::vector<int> padding,
                 std::vector<int> dilation, std::vector<int> output_padding,
                 int groups, StreamOrDevice s) {
  check_at_least(op, "padding", padding, 0);
  check_at_least(op, "output padding", output_padding, 0);
  check_at_least(op, "dilation", dilation, 1);
  size_t nd = stride.size();
  ConvParams p{std::vector<int>(nd, 1), {}, {}, dilation, stride};
  for (size_t d = 0; d < nd; ++d) {
    int k = w.ndim() == nd + 2 ? w.shape(d + 1) : 1;
    int edge = dilation[d] * (k - 1) - padding[d];
    p.lo.push_back(edge);
    p.hi.push_back(edge + output_padding[d]);
  }
  return conv_impl(op, in, w, p, groups, true, s);
}

std::vector<int> vec(const std::pair<int, int>& p) {
  return {p.first, p.second};
}
std::vector<int> vec(const std::tuple<int, int, int>& t) {
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t)};
}

} // namespace

array conv1d(const array& input, const array& weight, int stride, int padding,
             int dilation, int groups, StreamOrDevice s) {
  // As MLX's conv1d (conv_general with one value per parameter): inputs of
  // 2 or 3 spatial axes, with a weight of the same rank, take each
  // parameter on every axis.
  size_t nd = 1;
  if (input.ndim() == weight.ndim() && input.ndim() >= 4 && input.ndim() <= 5) {
    nd = input.ndim() - 2;
  }
  return forward("conv1d", input, weight, std::vector<int>(nd, stride),
                 std::vector<int>(nd, padding), std::vector<int>(nd, dilation),
                 groups, s);
}

array conv2d(const array& input, const array& weight,
             const std::pair<int, int>& stride,
             const std::pair<int, int>& padding,
             const std::pair<int, int>& dilation, int groups,
             StreamOrDevice s) {
  return forward("conv2d", input, weight, vec(stride), vec(padding),
                 vec(dilation), groups, s);
}

array conv3d(const array& input, const array& weight,
             const std::tuple<int, int, int>& stride,
             const std::tuple<int, int, int>& padding,
             const std::tuple<int, int, int>& dilation, int groups,
             StreamOrDevice s) {
  return forward("conv3d", input, weight, vec(stride), vec(padding),
                 vec(dilation), groups, s);
}

array conv_transpose1d(const array& input, const array& weight, int stride,
                       int padding, int dilation, int output_padding,
                       int groups, StreamOrDevice s) {
  return transposed("conv_transpose1d", input, weight, {stride}, {padding},
                    {dilation}, {output_padding}, groups, s);
}

array conv_transpose2d(const array& input, const array& weight,
                       const std::pair<int, int>& stride,
                       const std::pair<int, int>& padding,
                       const std::pair<int, int>& dilation,
                       const std::pair<int, int>& output_padding, int groups,
                       StreamOrDevice s) {
  return transposed("conv_transpose2d", input, weight, vec(stride),
                    vec(padding), vec(dilation), vec(output_padding), groups,
                    s);
}

array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride,
                       const std::tuple<int, int, int>& padding,
                       const std::tuple<int, int, int>& dilation,
                       const std::tuple<int, int, int>& output_padding,
                       int groups, StreamOrDevice s) {
  return transposed("conv_transpose3d", input, weight, vec(stride),
                    vec(padding), vec(dilation), vec(output_padding), groups,
                    s);
}

array conv_general(array input, array weight, std::vector<int> stride,
                   std::vector<int> padding_lo, std::vector<int> padding_hi,
                   std::vector<int> kernel_dilation,
                   std::vector<int> input_dilation, int groups, bool flip,
                   StreamOrDevice s) {
  const char* op = "conv_general";
  if (input.ndim() < 3 || input.ndim() > 5) {
    invalid(op,
            "the input must be (N, spatial..., C_in) with 1 to 3 spatial "
            "axes, got " +
                describe(input) + ".");
  }
  size_t nd = input.ndim() - 2;
  if (padding_hi.empty()) padding_hi = padding_lo;
  ConvParams p{per_axis(op, "stride", stride, nd, 1),
               per_axis(op, "padding_lo", padding_lo, nd, 0),
               per_axis(op, "padding_hi", padding_hi, nd, 0),
               per_axis(op, "kernel_dilation", kernel_dilation, nd, 1),
               per_axis(op, "input_dilation", input_dilation, nd, 1)};
  check_at_least(op, "padding", p.lo, 0);
  check_at_least(op, "padding", p.hi, 0);
  return conv_impl(op, input, weight, p, groups, flip, s);
}

} // namespace kiln
