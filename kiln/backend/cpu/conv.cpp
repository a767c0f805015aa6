// Convolution on the CPU: im2col (unfold the receptive fields of a block of
// output positions into rows) then one GEMM per group against the weight.
// float16/bfloat16 unfold straight into float32 and run sgemm.
#include <algorithm>
#include <array>
#include <cstring>

#include "kiln/backend/common/conv_geometry.h"
#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/gemm.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/conv.h"

namespace kiln {

namespace {

// Elements of unfolded input per block: bounds scratch memory (16 MiB of
// float32) while keeping GEMMs large.
constexpr int64_t block_elems = int64_t(1) << 22;

using detail::ConvGeometry;

// Unfold rows [r0, r1) (output positions) for group grp into cols, each row
// holding kernel_size * cg values in the weight's (K..., C) order.
template <typename T, typename G>
void im2col(const Convolution& p, const ConvGeometry& g, const T* in,
            int64_t grp, int64_t r0, int64_t r1, G* cols) {
  int64_t kc = g.kernel_size * g.cg;
  auto unfold = [&](size_t b, size_t e) {
    std::vector<int64_t> pos(g.nd), o(g.nd), k(g.nd);
    for (int64_t r = r0 + b; r < r0 + static_cast<int64_t>(e); ++r) {
      G* row = cols + (r - r0) * kc;
      int64_t rest = r;
      for (int d = g.nd - 1; d >= 0; --d) {
        o[d] = rest % g.out_len[d];
        rest /= g.out_len[d];
      }
      const T* base =
          in + rest * g.in_batch_stride + grp * g.cg * g.in_chan_stride;
      std::fill(k.begin(), k.end(), 0);
      for (int64_t kk = 0; kk < g.kernel_size; ++kk) {
        int64_t off = 0;
        bool valid = true;
        for (int d = 0; d < g.nd && valid; ++d) {
          int64_t kd = p.flip() ? g.k_len[d] - 1 - k[d] : k[d];
          int64_t v = o[d] * p.stride()[d] + kd * p.kernel_dilation()[d] -
                      p.padding_lo()[d];
          int64_t idil = p.input_dilation()[d];
          valid = v >= 0 && v % idil == 0 && v / idil < g.in_len[d];
          off += (v / idil) * g.in_stride[d];
        }
        G* dst = row + kk * g.cg;
        if (!valid) {
          std::fill(dst, dst + g.cg, G(0));
        } else {
          const T* src = base + off;
          for (int64_t c = 0; c < g.cg; ++c) {
            dst[c] = cast_to<G>(src[c * g.in_chan_stride]);
          }
        }
        for (int d = g.nd - 1; d >= 0; --d) {
          if (++k[d] < g.k_len[d]) break;
          k[d] = 0;
        }
      }
    }
  };
  size_t rows = static_cast<size_t>(r1 - r0);
  detail::parallel_for(
      rows, std::max<size_t>(1, 4096 / std::max<int64_t>(kc, 1)), unfold);
}

// The weight as a row-major (C_out, K... * C/groups) matrix of G.
template <typename T, typename G>
const G* weight_matrix(const array& w, std::vector<G>& scratch) {
  if constexpr (std::is_same_v<T, G>) {
    if (w.flags().row_contiguous) return w.data<G>();
  }
  scratch.resize(w.size());
  std::array<Strides, 1> st{w.strides()};
  Shape shape = detail::collapse_dims(w.shape(), st);
  const T* src = w.data<T>();
  G* dst = scratch.data();
  detail::for_each_row(shape, st, 0, detail::num_rows(shape),
                       [&](const auto& off, int64_t n) {
                         for (int64_t j = 0; j < n; ++j) {
                           *dst++ = cast_to<G>(src[off[0] + j * st[0].back()]);
                         }
                       });
  return scratch.data();
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
  std::vector<G> w_scratch;
  const G* wm = weight_matrix<T, G>(w, w_scratch);
  if constexpr (std::is_same_v<T, G>) {
    if (g.groups == 1 && detail::conv_is_pointwise(p, g, in)) {
      detail::gemm(false, true, static_cast<int>(rows),
                   static_cast<int>(g.c_out), static_cast<int>(kc), G(1),
                   in.data<G>(), static_cast<int>(kc), wm, static_cast<int>(kc),
                   G(0), o, static_cast<int>(g.c_out));
      return;
    }
  }
  int64_t block = std::clamp<int64_t>(block_elems / kc, 1, rows);
  std::vector<G> cols(static_cast<size_t>(block * kc)), acc;
  if constexpr (!std::is_same_v<T, G>) {
    acc.resize(static_cast<size_t>(block * g.c_out));
  }
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    int64_t r1 = std::min(rows, r0 + block), nr = r1 - r0;
    G* dst;
    if constexpr (std::is_same_v<T, G>) {
      dst = o + r0 * g.c_out;
    } else {
      dst = acc.data();
    }
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      im2col<T, G>(p, g, in.data<T>(), grp, r0, r1, cols.data());
      // (rows x kc) @ W_g^T, W_g being rows [grp * cog, ...) of the weight.
      detail::gemm(false, true, static_cast<int>(nr), static_cast<int>(g.cog),
                   static_cast<int>(kc), G(1), cols.data(),
                   static_cast<int>(kc), wm + grp * g.cog * kc,
                   static_cast<int>(kc), G(0), dst + grp * g.cog,
                   static_cast<int>(g.c_out));
    }
    if constexpr (!std::is_same_v<T, G>) {
      T* od = o + r0 * g.c_out;
      for (int64_t i = 0; i < nr * g.c_out; ++i) od[i] = cast_to<T>(acc[i]);
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

} // namespace kiln
