// Convolution on the CPU, one GEMM per group either way:
// - im2col: unfold the receptive fields of a block of output positions into
//   rows (K * cg values each), then multiply by the weight;
// - taps after the product, for inputs with more channels than the output
//   (input gradients): multiply every input position by every tap's
//   weights (K * cog values each), then sum each output position's taps.
// Which input element a tap reads comes from per-axis tables (padding,
// strides, dilations and flips resolved once per call). float16/bfloat16
// convert to float32 and run sgemm.
#include <algorithm>
#include <array>
#include <cstring>

#include "kiln/backend/common/conv_geometry.h"
#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/copy.h"
#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/scratch.h"
#include "kiln/core/allocator.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/conv.h"

namespace kiln {

namespace {

// Elements of unfolded input per block: bounds scratch memory (16 MiB of
// float32) while keeping GEMMs large.
constexpr int64_t block_elems = int64_t(1) << 22;

using detail::ConvGeometry;
using detail::Temp;

// For each spatial dimension d, the input index that output position o
// reads through kernel tap k, or -1 where that falls in the padding or
// between the elements of a dilated input: taps[d][o * k_len[d] + k]. The
// divisions happen here, once per (o, k) pair, not once per copied value.
using TapTables = std::vector<std::vector<int64_t>>;

TapTables tap_tables(const Convolution& p, const ConvGeometry& g) {
  TapTables taps(g.nd);
  for (int d = 0; d < g.nd; ++d) {
    int64_t kl = g.k_len[d], idil = p.input_dilation()[d];
    taps[d].resize(static_cast<size_t>(g.out_len[d] * kl));
    for (int64_t o = 0; o < g.out_len[d]; ++o) {
      for (int64_t k = 0; k < kl; ++k) {
        int64_t kd = p.flip() ? kl - 1 - k : k;
        int64_t v = o * p.stride()[d] + kd * p.kernel_dilation()[d] -
                    p.padding_lo()[d];
        bool valid = v >= 0 && v % idil == 0 && v / idil < g.in_len[d];
        taps[d][o * kl + k] = valid ? v / idil : -1;
      }
    }
  }
  return taps;
}

// Output positions in row-major order (batch, then O...): row r's position
// unravelled once, then stepped from row to row without divisions.
struct PositionWalk {
  const std::vector<int64_t>& len;
  std::vector<int64_t> o;
  int64_t batch;
  PositionWalk(const std::vector<int64_t>& out_len, int64_t r)
      : len(out_len), o(out_len.size()), batch(r) {
    for (int d = static_cast<int>(len.size()) - 1; d >= 0; --d) {
      o[d] = batch % len[d];
      batch /= len[d];
    }
  }
  void next() {
    int d = static_cast<int>(len.size()) - 1;
    for (; d >= 0; --d) {
      if (++o[d] < len[d]) return;
      o[d] = 0;
    }
    ++batch;
  }
};

// Calls f(t, inside, i) for every kernel tap t (flat, in the weight's K...
// order) of output position o: whether the tap reads an input element, and
// if so its offset i, base plus each axis's input index times step[d] (an
// offset may be negative: strides can be). The
// innermost axis's taps run in a loop of their own; the outer ones step
// like an odometer (k: scratch of nd entries).
template <typename F>
void for_each_tap(const TapTables& taps, const ConvGeometry& g,
                  const std::vector<int64_t>& o, int64_t base,
                  const int64_t* step, std::vector<int64_t>& k, F&& f) {
  int nd = g.nd;
  if (nd == 0) {
    f(int64_t(0), true, base);
    return;
  }
  int64_t k_inner = g.k_len[nd - 1];
  int64_t outer_taps = g.kernel_size / k_inner;
  const int64_t* inner = taps[nd - 1].data() + o[nd - 1] * k_inner;
  std::fill(k.begin(), k.end(), 0);
  for (int64_t t = 0; t < outer_taps; ++t) {
    int64_t off = base;
    bool valid = true;
    for (int d = 0; d < nd - 1 && valid; ++d) {
      int64_t i = taps[d][o[d] * g.k_len[d] + k[d]];
      valid = i >= 0;
      off += i * step[d];
    }
    for (int64_t kk = 0; kk < k_inner; ++kk) {
      int64_t i = inner[kk];
      f(t * k_inner + kk, valid && i >= 0, off + i * step[nd - 1]);
    }
    for (int d = nd - 2; d >= 0; --d) {
      if (++k[d] < g.k_len[d]) break;
      k[d] = 0;
    }
  }
}

// Unfold rows [r0, r1) (output positions) for group grp into cols, each row
// holding kernel_size * cg values in the weight's (K..., C) order.
template <typename T, typename G>
void im2col(const ConvGeometry& g, const TapTables& taps, const T* in,
            int64_t grp, int64_t r0, int64_t r1, G* cols) {
  int64_t kc = g.kernel_size * g.cg;
  int nd = g.nd;
  int64_t cg = g.cg, cs = g.in_chan_stride;
  auto copy_channels = [&](G* dst, const T* src) {
    if (cg == 1) {
      dst[0] = cast_to<G>(src[0]);
      return;
    }
    if constexpr (std::is_same_v<T, G>) {
      if (cs == 1) {
        std::memcpy(dst, src, static_cast<size_t>(cg) * sizeof(G));
        return;
      }
    }
    for (int64_t c = 0; c < cg; ++c) dst[c] = cast_to<G>(src[c * cs]);
  };
  auto unfold = [&](size_t b, size_t e) {
    PositionWalk pos(g.out_len, r0 + static_cast<int64_t>(b));
    std::vector<int64_t> k(nd);
    for (int64_t r = r0 + b; r < r0 + static_cast<int64_t>(e);
         ++r, pos.next()) {
      G* row = cols + (r - r0) * kc;
      int64_t base = pos.batch * g.in_batch_stride + grp * cg * cs;
      for_each_tap(taps, g, pos.o, base, g.in_stride.data(), k,
                   [&](int64_t t, bool inside, int64_t i) {
                     G* dst = row + t * cg;
                     if (!inside) {
                       std::fill(dst, dst + cg, G(0));
                     } else {
                       copy_channels(dst, in + i);
                     }
                   });
    }
  };
  // Two spatial axes (conv2d, the usual case): the same walk with every
  // table and stride in a local, two plain tap loops and no odometer.
  auto unfold_2d = [&](size_t b, size_t e) {
    const int64_t* tap_y = taps[0].data();
    const int64_t* tap_x = taps[1].data();
    const int64_t kh = g.k_len[0], kw = g.k_len[1];
    const int64_t oh = g.out_len[0], ow = g.out_len[1];
    const int64_t sy = g.in_stride[0], sx = g.in_stride[1];
    int64_t r = r0 + static_cast<int64_t>(b);
    int64_t ox = r % ow, oy = (r / ow) % oh, batch = r / ow / oh;
    for (; r < r0 + static_cast<int64_t>(e); ++r) {
      G* dst = cols + (r - r0) * kc;
      const T* base = in + batch * g.in_batch_stride + grp * cg * cs;
      const int64_t* ys = tap_y + oy * kh;
      const int64_t* xs = tap_x + ox * kw;
      for (int64_t ky = 0; ky < kh; ++ky) {
        int64_t iy = ys[ky];
        if (iy < 0) {
          std::fill(dst, dst + kw * cg, G(0));
          dst += kw * cg;
          continue;
        }
        const T* line = base + iy * sy;
        if (cg == 1) {
          for (int64_t kx = 0; kx < kw; ++kx) {
            int64_t ix = xs[kx];
            dst[kx] = ix < 0 ? G(0) : cast_to<G>(line[ix * sx]);
          }
          dst += kw;
          continue;
        }
        for (int64_t kx = 0; kx < kw; ++kx, dst += cg) {
          int64_t ix = xs[kx];
          if (ix < 0) {
            std::fill(dst, dst + cg, G(0));
          } else {
            copy_channels(dst, line + ix * sx);
          }
        }
      }
      if (++ox == ow) {
        ox = 0;
        if (++oy == oh) {
          oy = 0;
          ++batch;
        }
      }
    }
  };
  size_t rows = static_cast<size_t>(r1 - r0);
  size_t grain = std::max<size_t>(1, 4096 / std::max<int64_t>(kc, 1));
  if (nd == 2) {
    detail::parallel_for(rows, grain, unfold_2d);
  } else {
    detail::parallel_for(rows, grain, unfold);
  }
}

// Whether to convolve by taps after the product (conv_by_taps) rather than
// im2col: for a row-major input with more channels per group than the
// output has (an input gradient, whose cotangent has C_out channels and
// whose result C_in), where the product's rows (K * cog per input
// position) take at most half the patch matrix's (K * cg per output
// position), and fit the scratch bound.
bool taps_after_product(const ConvGeometry& g, const array& in) {
  int64_t in_rows = g.n, out_rows = g.n * g.out_spatial;
  for (int d = 0; d < g.nd; ++d) in_rows *= g.in_len[d];
  int64_t product = in_rows * g.kernel_size * g.cog;
  return in.flags().row_contiguous && product <= block_elems &&
         2 * in_rows * g.cog <= out_rows * g.cg;
}

// Convolution as a product, then a sum over taps: per group, P = X B with X
// the (N * S..., cg) input and B the weight rearranged to (cg, K * cog), so
// P holds every input position times every tap's weights; output position
// o then adds, over its taps k, the cog values P[i(o, k), k] of the input
// position i that tap reads (the tap tables: padding and dilation as
// im2col reads them). The same products as im2col's GEMM, summed over the
// channels first and the taps after.
template <typename T, typename G>
void conv_by_taps(const ConvGeometry& g, const TapTables& taps,
                  const array& in, const G* wm, T* o) {
  int nd = g.nd;
  int64_t K = g.kernel_size, cg = g.cg, cog = g.cog;
  std::vector<int64_t> in_step(nd); // row step of each input axis
  int64_t in_spatial = 1;
  for (int d = nd - 1; d >= 0; --d) {
    in_step[d] = in_spatial;
    in_spatial *= g.in_len[d];
  }
  int64_t in_rows = g.n * in_spatial, out_rows = g.n * g.out_spatial;
  array xa = detail::row_major(in, TypeToDtype<G>::value);
  const G* x = xa.data<G>();
  Temp<G> b(static_cast<size_t>(cg * K * cog));
  Temp<G> prod(static_cast<size_t>(in_rows * K * cog));
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    // B[c, k * cog + j] = w[grp * cog + j, k, c] (wm is (C_out, K * cg)).
    G* bm = b.get();
    for (int64_t j = 0; j < cog; ++j) {
      const G* wr = wm + (grp * cog + j) * K * cg;
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t c = 0; c < cg; ++c) {
          bm[c * K * cog + k * cog + j] = wr[k * cg + c];
        }
      }
    }
    detail::gemm(false, false, static_cast<int>(in_rows),
                 static_cast<int>(K * cog), static_cast<int>(cg), G(1),
                 x + grp * cg, static_cast<int>(g.c_in), b.get(),
                 static_cast<int>(K * cog), G(0), prod.get(),
                 static_cast<int>(K * cog));
    // Output rows [begin, end), each the sum over its taps of the product
    // rows those taps read.
    auto gather = [&](size_t begin, size_t end) {
      PositionWalk pos(g.out_len, static_cast<int64_t>(begin));
      std::vector<int64_t> k(nd);
      std::vector<G> acc(static_cast<size_t>(cog));
      const G* pr = prod.get();
      for (int64_t r = begin; r < static_cast<int64_t>(end);
           ++r, pos.next()) {
        std::fill(acc.begin(), acc.end(), G(0));
        for_each_tap(taps, g, pos.o, pos.batch * in_spatial, in_step.data(),
                     k, [&](int64_t t, bool inside, int64_t i) {
                       if (!inside) return;
                       const G* src = pr + (i * K + t) * cog;
                       for (int64_t j = 0; j < cog; ++j) acc[j] += src[j];
                     });
        T* dst = o + r * g.c_out + grp * cog;
        for (int64_t j = 0; j < cog; ++j) dst[j] = cast_to<T>(acc[j]);
      }
    };
    detail::parallel_for(
        static_cast<size_t>(out_rows),
        std::max<size_t>(1, 4096 / std::max<int64_t>(K * cog, 1)), gather);
  }
}

template <typename T, typename G>
void run_conv(const Convolution& p, const array& in, const array& w,
              array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  auto g = detail::conv_geometry(in, w, out);
  int64_t rows = g.n * g.out_spatial, kc = g.kernel_size * g.cg;
  T* o = out.data<T>();
  if (kc == 0) {
    std::fill(o, o + out.size(), T(0));
    return;
  }
  array wa = detail::row_major(w, TypeToDtype<G>::value); // (C_out, K * cg)
  const G* wm = wa.data<G>();
  if constexpr (std::is_same_v<T, G>) {
    if (g.groups == 1 && detail::conv_is_pointwise(p, g, in)) {
      detail::gemm(false, true, static_cast<int>(rows),
                   static_cast<int>(g.c_out), static_cast<int>(kc), G(1),
                   in.data<G>(), static_cast<int>(kc), wm, static_cast<int>(kc),
                   G(0), o, static_cast<int>(g.c_out));
      return;
    }
  }
  TapTables taps = tap_tables(p, g);
  if (taps_after_product(g, in)) {
    conv_by_taps<T, G>(g, taps, in, wm, o);
    return;
  }
  // im2col reads each input element once per kernel tap: an input that is
  // not row-major (a weight gradient's, a transposed view) is copied
  // row-major once, so that those reads are runs of consecutive channels.
  array ia = in;
  if (!in.flags().row_contiguous && g.kernel_size > 1) {
    ia = detail::row_major(in, in.dtype());
    g.in_chan_stride = 1;
    int64_t step = g.c_in;
    for (int d = g.nd - 1; d >= 0; --d) {
      g.in_stride[d] = step;
      step *= g.in_len[d];
    }
    g.in_batch_stride = step;
  }
  int64_t block = std::clamp<int64_t>(block_elems / kc, 1, rows);
  Temp<G> cols(static_cast<size_t>(block * kc));
  Temp<G> acc; // the GEMM's float results of a 16-bit convolution
  if constexpr (!std::is_same_v<T, G>) {
    acc.allocate(static_cast<size_t>(block * g.c_out));
  }
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    int64_t r1 = std::min(rows, r0 + block), nr = r1 - r0;
    G* dst;
    if constexpr (std::is_same_v<T, G>) {
      dst = o + r0 * g.c_out;
    } else {
      dst = acc.get();
    }
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      im2col<T, G>(g, taps, ia.data<T>(), grp, r0, r1, cols.get());
      // (rows x kc) @ W_g^T, W_g being rows [grp * cog, ...) of the weight.
      detail::gemm(false, true, static_cast<int>(nr), static_cast<int>(g.cog),
                   static_cast<int>(kc), G(1), cols.get(),
                   static_cast<int>(kc), wm + grp * g.cog * kc,
                   static_cast<int>(kc), G(0), dst + grp * g.cog,
                   static_cast<int>(g.c_out));
    }
    if constexpr (!std::is_same_v<T, G>) {
      T* od = o + r0 * g.c_out;
      const G* a = acc.get();
      for (int64_t i = 0; i < nr * g.c_out; ++i) od[i] = cast_to<T>(a[i]);
    }
  }
}

} // namespace

void Convolution::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  const array& w = inputs[1];
  dispatch_type(out.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (is_half_v<T>) {
      run_conv<T, float>(*this, in, w, out);
    } else if constexpr (std::is_same_v<T, float> ||
                         std::is_same_v<T, double>) {
      run_conv<T, T>(*this, in, w, out);
    } else {
      throw std::invalid_argument("[Convolution] unsupported dtype " +
                                  dtype_name(out.dtype()) + ".");
    }
  });
}

// The CPU computes a weight gradient by its fallback graph's nodes, built at
// evaluation so that a shapeless compile's new shapes reach them.
void ConvolutionWeightGrad::eval_cpu(const std::vector<array>& inputs,
                                     std::vector<array>& outputs) {
  eval_fallback(inputs, outputs);
}

} // namespace kiln
