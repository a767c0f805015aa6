// Transformation rules of Convolution. Both gradients are convolutions
// again: the input's is a transposed convolution of the cotangent with the
// channel-swapped kernel, the weight's a convolution of the input with the
// cotangent as kernel. Per spatial axis, with input length L, kernel K,
// output O, stride s, padding lo/hi, kernel dilation kd and input dilation
// id, the (virtual, dilated and padded) input z has length
// P = (L - 1) id + 1 + lo + hi and out[o] = sum_k z[o s + k kd] w[k].
#include <optional>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/primitives/conv.h"

namespace kiln {

namespace {

struct ConvArgs {
  std::vector<int> stride, lo, hi, kernel_dilation, input_dilation;
  int groups;
  bool flip;
};

array conv_node(Stream s, const array& x, const array& w, const ConvArgs& p) {
  Shape out = conv_output_shape(x.shape(), w.shape(), p.stride, p.lo, p.hi,
                                p.kernel_dilation, p.input_dilation);
  return array(
      out, x.dtype(),
      std::make_shared<Convolution>(s, p.stride, p.lo, p.hi, p.kernel_dilation,
                                    p.input_dilation, p.groups, p.flip),
      {x, w});
}

// Reverse the spatial axes (1 .. nd) of a kernel.
array flip_spatial(const array& w, StreamOrDevice s) {
  Shape start(w.ndim(), 0), stop = w.shape(), step(w.ndim(), 1);
  for (size_t d = 1; d + 1 < w.ndim(); ++d) {
    start[d] = w.shape(d) - 1;
    stop[d] = -w.shape(d) - 1;
    step[d] = -1;
  }
  return slice(w, start, stop, step, s);
}

// Shape with the last axis split into (a, rest).
Shape split_last(const Shape& shape, int a) {
  Shape out(shape.begin(), shape.end() - 1);
  out.push_back(a);
  out.push_back(shape.back() / a);
  return out;
}

// dw[k] = sum_{n,o} z[o s + k kd] cot[o]: the input (channels as the
// batch, batch as the channels, one block per group) convolved with the
// cotangent as kernel, stepping by kd. hi is trimmed so exactly K
// positions come out. ConvolutionWeightGrad's meaning.
array weight_grad_graph(const Convolution& c, const array& x,
                        const array& cot, const Shape& w_shape) {
  Stream so = c.stream();
  int nd = static_cast<int>(x.ndim()) - 2;
  int g = c.groups(), c_in = x.shape(-1);
  ConvArgs p{c.kernel_dilation(), c.padding_lo(), {},   c.stride(),
             c.input_dilation(),  g,              false};
  for (int d = 0; d < nd; ++d) {
    p.hi.push_back((w_shape[d + 1] - 1) * c.kernel_dilation()[d] +
                   (cot.shape(d + 1) - 1) * c.stride()[d] -
                   (x.shape(d + 1) - 1) * c.input_dilation()[d] -
                   c.padding_lo()[d]);
  }
  // x (N, S..., C_in) -> (C_in/g, S..., g * N)
  auto xg = reshape(x, split_last(x.shape(), g), so);
  std::vector<int> perm = {nd + 2};
  for (int d = 0; d < nd; ++d) perm.push_back(d + 1);
  perm.insert(perm.end(), {nd + 1, 0});
  Shape xt_shape = {c_in / g};
  xt_shape.insert(xt_shape.end(), x.shape().begin() + 1, x.shape().end() - 1);
  xt_shape.push_back(g * x.shape(0));
  auto xt = reshape(transpose(xg, perm, so), xt_shape, so);
  // cot (N, O..., C_out) -> (C_out, O..., N), and back for the result.
  std::vector<int> swap = {nd + 1};
  for (int d = 0; d < nd; ++d) swap.push_back(d + 1);
  swap.push_back(0);
  auto ct = transpose(cot, swap, so);
  auto dw = transpose(conv_node(so, xt, ct, p), swap, so);
  return c.flip() ? flip_spatial(dw, so) : dw;
}

} // namespace

std::vector<array> Convolution::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<array>&) {
  StreamOrDevice so = stream();
  const array &x = primals[0], &w = primals[1], &cot = cotangents[0];
  int nd = static_cast<int>(x.ndim()) - 2;
  int g = groups_, c_in = x.shape(-1), c_out = w.shape(0);
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      // dz[p] = sum_k cot_dilated[p - k kd] w[k], read only where p hits an
      // input element (p = lo + i id): a convolution of the stride-dilated
      // cotangent with the kernel turned around, stepping by id.
      ConvArgs p{input_dilation_, {}, {}, kernel_dilation_, stride_, g, !flip_};
      for (int d = 0; d < nd; ++d) {
        int k_span = (w.shape(d + 1) - 1) * kernel_dilation_[d];
        p.lo.push_back(k_span - padding_lo_[d]);
        p.hi.push_back((x.shape(d + 1) - 1) * input_dilation_[d] +
                       padding_lo_[d] - (cot.shape(d + 1) - 1) * stride_[d]);
      }
      // (C_out, K..., C_in/g) -> (C_in, K..., C_out/g), group by group.
      Shape gw = {g, c_out / g};
      gw.insert(gw.end(), w.shape().begin() + 1, w.shape().end());
      std::vector<int> perm = {0, nd + 2};
      for (int d = 0; d < nd; ++d) perm.push_back(d + 2);
      perm.push_back(1);
      Shape wt_shape = {c_in};
      wt_shape.insert(wt_shape.end(), w.shape().begin() + 1, w.shape().end());
      wt_shape.back() = c_out / g;
      auto wt = reshape(transpose(reshape(w, gw, so), perm, so), wt_shape, so);
      out.push_back(conv_node(stream(), cot, wt, p));
    } else {
      auto self = std::static_pointer_cast<const Convolution>(
          shared_from_this());
      fast::Fallback graph = [self, ws = w.shape()](std::vector<array> in) {
        return std::vector<array>{weight_grad_graph(*self, in[0], in[1], ws)};
      };
      out.push_back(array(
          w.shape(), x.dtype(),
          std::make_shared<ConvolutionWeightGrad>(stream(), std::move(graph),
                                                  self, w.shape()),
          {x, cot}));
    }
  }
  return out;
}

std::vector<array> Convolution::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  // Bilinear: d(x * w) = dx * w + x * dw, with this same convolution.
  std::optional<array> t;
  for (size_t k = 0; k < argnums.size(); ++k) {
    std::vector<array> in = primals;
    in[argnums[k]] = tangents[k];
    array term(output_shapes(in)[0], primals[0].dtype(), shared_from_this(),
               in);
    t = t ? add(*t, term, stream()) : term;
  }
  return {*t};
}

std::pair<std::vector<array>, std::vector<int>> Convolution::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice so = stream();
  array x = inputs[0], w = inputs[1];
  int ix = axes[0], iw = axes[1];
  int nd = static_cast<int>(x.ndim()) - 2 - (ix >= 0 ? 1 : 0);
  int b = ix >= 0 ? x.shape(ix) : w.shape(iw);
  ConvArgs p{stride_,         padding_lo_, padding_hi_, kernel_dilation_,
             input_dilation_, groups_,     flip_};
  if (iw < 0) {
    // Mapped input only: the batch joins N.
    x = moveaxis(x, ix, 0, so);
    Shape flat(x.shape().begin() + 1, x.shape().end());
    flat[0] *= b;
    auto y = conv_node(stream(), reshape(x, flat, so), w, p);
    Shape shape = y.shape();
    shape[0] /= b;
    shape.insert(shape.begin(), b);
    return {{reshape(y, shape, so)}, {0}};
  }
  // A mapped weight joins C_out, ordered (group, batch, C_out / g) so each
  // group still sees its own output channels.
  w = moveaxis(w, iw, 0, so);
  int g = groups_, c_out = w.shape(1);
  Shape wg = {b, g, c_out / g};
  wg.insert(wg.end(), w.shape().begin() + 2, w.shape().end());
  Shape wflat(w.shape().begin() + 1, w.shape().end());
  wflat[0] *= b;
  if (ix < 0) {
    w = reshape(moveaxis(reshape(w, wg, so), 0, 1, so), wflat, so);
    auto y = conv_node(stream(), x, w, p);
    Shape ys(y.shape().begin(), y.shape().end() - 1);
    ys.insert(ys.end(), {g, b, c_out / g});
    // (N, O..., g, B, C_out/g) -> (N, O..., B, C_out)
    auto yb = moveaxis(reshape(y, ys, so), nd + 2, nd + 1, so);
    Shape out(ys.begin(), ys.end() - 3);
    out.insert(out.end(), {b, c_out});
    return {{reshape(yb, out, so)}, {nd + 1}};
  }
  // Both mapped: the batch becomes groups, input channels (batch, C_in) and
  // output channels (batch, C_out).
  x = moveaxis(moveaxis(x, ix, 0, so), 0, nd + 1, so);
  Shape xflat(x.shape().begin(), x.shape().end() - 1);
  xflat.back() *= x.shape(-1);
  p.groups = b * g;
  auto y = conv_node(stream(), reshape(x, xflat, so), reshape(w, wflat, so), p);
  Shape out(y.shape().begin(), y.shape().end() - 1);
  out.insert(out.end(), {b, c_out});
  return {{reshape(y, out, so)}, {nd + 1}};
}

} // namespace kiln
