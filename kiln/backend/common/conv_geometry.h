// The sizes and input strides a convolution's im2col walks, shared by the
// backends: the patch matrix has N * out_spatial rows and, per group,
// kernel_size * cg columns in the weight's (K..., C) order.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/primitives/conv.h"

namespace kiln::detail {

struct ConvGeometry {
  int nd;
  int64_t n, c_in, c_out, groups, cg, cog;
  std::vector<int64_t> in_len, k_len, out_len, in_stride;
  int64_t in_batch_stride, in_chan_stride;
  int64_t kernel_size, out_spatial;
};

inline ConvGeometry conv_geometry(const array& in, const array& w,
                                  const array& out) {
  ConvGeometry g;
  g.nd = static_cast<int>(in.ndim()) - 2;
  g.n = in.shape(0);
  g.c_in = in.shape(-1);
  g.c_out = w.shape(0);
  g.cg = w.shape(-1);
  g.groups = g.cg > 0 ? g.c_in / g.cg : g.c_out;
  g.cog = g.groups > 0 ? g.c_out / g.groups : 0;
  g.kernel_size = g.out_spatial = 1;
  for (int d = 0; d < g.nd; ++d) {
    g.in_len.push_back(in.shape(d + 1));
    g.in_stride.push_back(in.strides()[d + 1]);
    g.k_len.push_back(w.shape(d + 1));
    g.out_len.push_back(out.shape(d + 1));
    g.kernel_size *= g.k_len.back();
    g.out_spatial *= g.out_len.back();
  }
  g.in_batch_stride = in.strides()[0];
  g.in_chan_stride = in.strides().back();
  return g;
}

/** A 1x1 kernel with unit stride, no input dilation and no padding reads
 *  the row-contiguous input itself as the patch matrix (rows of C_in, each
 *  group's columns at its channel offset). */
inline bool conv_is_pointwise(const Convolution& p, const ConvGeometry& g,
                              const array& in) {
  if (g.kernel_size != 1 || p.flip()) return false;
  for (int d = 0; d < g.nd; ++d) {
    if (p.stride()[d] != 1 || p.input_dilation()[d] != 1 ||
        p.padding_lo()[d] != 0 || p.padding_hi()[d] != 0) {
      return false;
    }
  }
  return in.flags().row_contiguous;
}

} // namespace kiln::detail
