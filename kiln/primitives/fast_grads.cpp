// Transformation rules of the fused fast primitives. Gradients come from the
// fallback graphs (RoPE's from a rotation by the opposite angles; the norms'
// on the CPU and attention's on the GPU from fused backwards where those
// apply); vmap keeps the fused kernels by folding the mapped axis into an
// axis they already loop over.
#include <algorithm>

#include "kiln/config.h"
#include "kiln/core/run_nodes.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fast.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/fast.h"
#include "kiln/transforms/autograd.h"

namespace kiln::fast {

using detail::batch_first;
using detail::to_batch_first;
using detail::batch_size;

namespace {

// The fallback as a function of the inputs at idx only, the others fixed.
Fn partial_fallback(const Fallback& f, const std::vector<array>& primals,
                    const std::vector<int>& idx) {
  return [f, primals, idx](const std::vector<array>& xs) {
    auto args = primals;
    for (size_t k = 0; k < idx.size(); ++k) args[idx[k]] = xs[k];
    return f(std::move(args));
  };
}

} // namespace

// ---- rules from the fallback ------------------------------------------------

void Custom::eval_fallback(const std::vector<array>& inputs,
                           std::vector<array>& outputs) {
  auto outs = fallback_(inputs);
  for (auto& o : outs) o = contiguous(o, false, stream());
  detail::run_nodes(outs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(outs[i]);
  }
}


std::vector<array> Custom::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>&) {
  std::vector<int> idx;
  std::vector<array> chosen;
  for (int i : argnums) {
    if (!is_floating_point(primals[i].dtype())) continue;
    idx.push_back(i);
    chosen.push_back(primals[i]);
  }
  std::vector<array> grads;
  if (!chosen.empty()) {
    grads =
        kiln::vjp(partial_fallback(fallback_, primals, idx), chosen, cotangents)
            .second;
  }
  std::vector<array> out;
  for (size_t k = 0, j = 0; k < argnums.size(); ++k) {
    bool diff = j < idx.size() && idx[j] == argnums[k];
    out.push_back(diff ? grads[j++] : zeros_like(primals[argnums[k]]));
  }
  return out;
}

std::vector<array> Custom::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  std::vector<int> idx;
  std::vector<array> chosen, tans;
  for (size_t k = 0; k < argnums.size(); ++k) {
    int i = argnums[k];
    if (!is_floating_point(primals[i].dtype())) continue;
    idx.push_back(i);
    chosen.push_back(primals[i]);
    tans.push_back(tangents[k]);
  }
  if (chosen.empty()) {
    // Only integer or bool inputs vary: the output does not.
    return {zeros(output_shapes(primals)[0], primals[0].dtype())};
  }
  return kiln::jvp(partial_fallback(fallback_, primals, idx), chosen, tans)
      .second;
}

std::pair<std::vector<array>, std::vector<int>> Custom::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  Fn f = [fb = fallback_](const std::vector<array>& in) { return fb(in); };
  auto outs = kiln::vmap(f, axes)(inputs);
  return {outs, std::vector<int>(outs.size(), 0)};
}

// ---- norms ------------------------------------------------------------------

namespace {

// A weight or bias mapped at axis, shaped to broadcast against x with the
// batch axis first: (n, 1, ..., 1, D), or (n, 1, ..., 1) for a 0-d one.
array batched_param(const array& p, int axis, int ndim) {
  auto pb = batch_first(p, axis);
  Shape shape(ndim, 1);
  shape[0] = pb.shape(0);
  if (pb.ndim() == 2) shape.back() = pb.shape(1);
  return reshape(pb, shape);
}

// x normalized over its last axis by prim, then scaled and shifted by
// params that may be mapped (so the kernel cannot take them).
std::pair<std::vector<array>, std::vector<int>> norm_vmap(
    const std::shared_ptr<Primitive>& prim, const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  int n = batch_size(inputs, axes);
  auto x = to_batch_first(inputs[0], axes[0], n);
  Dtype dt = x.dtype();
  bool params_mapped = false;
  for (size_t i = 1; i < inputs.size(); ++i) params_mapped |= axes[i] >= 0;
  if (!params_mapped) {
    auto in = inputs;
    in[0] = x;
    return {{array(x.shape(), dt, prim, in)}, {0}};
  }
  std::vector<array> in = {x, array(1, dt)};
  if (inputs.size() == 3) in.push_back(array(0, dt));
  array out(x.shape(), dt, prim, in);
  int nd = static_cast<int>(x.ndim());
  auto param = [&](size_t i) {
    return axes[i] >= 0 ? batched_param(inputs[i], axes[i], nd) : inputs[i];
  };
  out = multiply(out, param(1));
  if (inputs.size() == 3) out = add(out, param(2));
  return {{out}, {0}};
}

} // namespace

namespace {

// The fused backward's fallback: the vjp of the norm's fallback for x and
// weight at (x, weight, cotangent). The bias (0 here) does not affect them.
Fallback norm_vjp_graph(Fallback forward, bool has_bias) {
  return [forward = std::move(forward), has_bias](std::vector<array> in) {
    std::vector<array> primals = {in[0], in[1]};
    if (has_bias) primals.push_back(array(0, in[0].dtype()));
    auto f = partial_fallback(forward, primals, {0, 1});
    return kiln::vjp(f, {in[0], in[1]}, {in[2]}).second;
  };
}

// Whether the fused backward takes these primals and cotangent: the
// norm's own layout (weight 1-d or 0-d, all of one floating dtype) and a
// nonempty x; on the GPU, a dtype its kernels take (float16, bfloat16,
// float32, float64).
bool fused_norm_backward_fits(const NormCustom& p,
                              const std::vector<array>& primals,
                              const array& g) {
  const array &x = primals[0], &w = primals[1];
  bool device_takes = p.device() == Device::cpu ||
                      x.dtype() == float16 || x.dtype() == bfloat16 ||
                      x.dtype() == float32 || x.dtype() == float64;
  return device_takes && x.size() > 0 &&
         is_floating_point(x.dtype()) && g.shape() == x.shape() &&
         g.dtype() == x.dtype() && w.dtype() == x.dtype() && w.ndim() <= 1;
}

// The gradients of a norm with the fused backward Vjp for x and weight and
// (LayerNorm) the bias's as sum(g) over rows; the fallback graph's rules
// where the fused backward does not fit.
template <typename Vjp>
std::vector<array> norm_vjp(NormCustom& p, const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>& argnums,
                            const std::vector<array>& outputs) {
  const array &x = primals[0], &w = primals[1], &g = cotangents[0];
  if (!fused_norm_backward_fits(p, primals, g)) {
    return p.Custom::vjp(primals, cotangents, argnums, outputs);
  }
  bool has_bias = primals.size() == 3;
  std::vector<array> grads;
  if (std::any_of(argnums.begin(), argnums.end(),
                  [](int i) { return i < 2; })) {
    grads = array::make_arrays(
        {x.shape(), w.shape()}, {x.dtype(), w.dtype()},
        std::make_shared<Vjp>(p.stream(),
                              norm_vjp_graph(p.fallback(), has_bias), p.eps()),
        {x, w, g});
  }
  std::vector<array> out;
  for (int i : argnums) {
    if (i < 2) {
      out.push_back(grads[i]);
      continue;
    }
    const array& b = primals[2];
    int d = x.shape(-1);
    auto db = b.ndim() == 0 ? sum(g, false, p.stream())
                            : sum(reshape(g, {-1, d}, p.stream()), 0, false,
                                  p.stream());
    out.push_back(astype(db, b.dtype(), p.stream()));
  }
  return out;
}

} // namespace

std::vector<array> LayerNorm::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums,
                                  const std::vector<array>& outputs) {
  return norm_vjp<LayerNormVjp>(*this, primals, cotangents, argnums, outputs);
}

std::vector<array> RMSNorm::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  return norm_vjp<RMSNormVjp>(*this, primals, cotangents, argnums, outputs);
}

std::pair<std::vector<array>, std::vector<int>> LayerNorm::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return norm_vmap(shared_from_this(), inputs, axes);
}

std::pair<std::vector<array>, std::vector<int>> RMSNorm::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return norm_vmap(shared_from_this(), inputs, axes);
}

// ---- RoPE -------------------------------------------------------------------

namespace {

// rope with this primitive's parameters and a given angle scale.
array rope_like(const RoPE& p, const array& x, const array& offset,
                const std::vector<array>& inputs, float scale) {
  std::optional<array> freqs;
  std::optional<float> base;
  if (inputs.size() == 3) {
    freqs = inputs[2];
  } else {
    base = p.base();
  }
  return rope(x, p.dims(), p.traditional(), base, scale, offset, freqs,
              p.stream());
}

} // namespace

std::vector<array> RoPE::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  // The rotation is orthogonal: its transpose rotates by the opposite angle.
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(
          rope_like(*this, cotangents[0], primals[1], primals, -scale_));
    } else if (i == 1) {
      out.push_back(zeros_like(primals[1]));
    } else {
      out.push_back(Custom::vjp(primals, cotangents, {i}, outputs)[0]);
    }
  }
  return out;
}

std::vector<array> RoPE::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  if (argnums.back() == 2) return Custom::jvp(primals, tangents, argnums);
  if (argnums[0] != 0) return {zeros_like(primals[0])};
  // Linear in x.
  return {rope_like(*this, tangents[0], primals[1], primals, scale_)};
}

std::pair<std::vector<array>, std::vector<int>> RoPE::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  if (inputs.size() == 3 && axes[2] >= 0) return Custom::vmap(inputs, axes);
  if (axes[1] < 0) {
    // (B, n, ..., T, D): the offsets still index the leading axis.
    auto x = moveaxis(inputs[0], axes[0], 1);
    return {{rope_like(*this, x, inputs[1], inputs, scale_)}, {1}};
  }
  // Mapped offsets: fold the batch into B, with one offset per (n, B) pair.
  int n = batch_size(inputs, axes);
  auto x = to_batch_first(inputs[0], axes[0], n);
  int B = x.shape(1);
  auto off = reshape(batch_first(inputs[1], axes[1]), {n, -1});
  off = reshape(broadcast_to(off, {n, B}), {n * B});
  auto out = rope_like(*this, flatten(x, 0, 1), off, inputs, scale_);
  return {{unflatten(out, 0, {n, B})}, {0}};
}

// ---- scaled_dot_product_attention ------------------------------------------

#if KILN_HAS_CUDA
namespace {

// The backward's fallback: the vjp of the forward's fallback (its first
// output) for q, k and v at inputs (q, k, v, cotangent[, mask][, output,
// stats]).
Fallback sdpa_vjp_graph(Fallback forward, bool has_mask) {
  return [forward = std::move(forward), has_mask](std::vector<array> in) {
    std::vector<array> primals = {in[0], in[1], in[2]};
    if (has_mask) primals.push_back(in[4]);
    auto f = partial_fallback(forward, primals, {0, 1, 2});
    auto out = [f](const std::vector<array>& x) {
      return std::vector<array>{f(x)[0]};
    };
    return kiln::vjp(out, {in[0], in[1], in[2]}, {in[3]}).second;
  };
}

} // namespace
#endif

std::vector<array> ScaledDotProductAttention::vjp(
    const std::vector<array>& primals, const std::vector<array>& cotangents,
    const std::vector<int>& argnums, const std::vector<array>& outputs) {
#if KILN_HAS_CUDA
  // On the GPU the fused backward computes q's, k's and v's gradients (a
  // mask's, rare, still comes from the graph, for everything; so do empty
  // inputs).
  const array &q = primals[0], &k = primals[1], &v = primals[2];
  bool qkv_only = true;
  for (int i : argnums) qkv_only = qkv_only && i < 3;
  if (device() == Device::gpu && qkv_only && q.size() > 0 && k.size() > 0 &&
      gpu_fused_backward_fits(q.dtype(), q.shape(3), v.shape(3),
                              has_sinks_)) {
    bool has_mask = primals.size() > 3;
    std::vector<array> in = {q, k, v, cotangents[0]};
    if (has_mask) in.push_back(primals[3]);
    if (with_stats_) {
      in.push_back(outputs[0]);
      in.push_back(outputs[1]);
    }
    auto grads = array::make_arrays(
        {q.shape(), k.shape(), v.shape()}, {q.dtype(), k.dtype(), v.dtype()},
        std::make_shared<ScaledDotProductAttentionVjp>(
            stream(), sdpa_vjp_graph(fallback_, has_mask), scale_,
            do_causal_, with_stats_),
        std::move(in));
    std::vector<array> out;
    for (int i : argnums) out.push_back(grads[i]);
    return out;
  }
#endif
  return Custom::vjp(primals, cotangents, argnums, outputs);
}

std::pair<std::vector<array>, std::vector<int>> ScaledDotProductAttention::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // Mapped sinks differ per batch element: only the fallback handles them.
  if (has_sinks_ && axes.back() >= 0) return Custom::vmap(inputs, axes);
  // The mapped axis folds into the batch axis B.
  int n = batch_size(inputs, axes);
  int B = inputs[0].shape(axes[0] == 0 ? 1 : 0);
  size_t n_folded = inputs.size() - (has_sinks_ ? 1 : 0);
  std::vector<array> in;
  for (size_t i = 0; i < n_folded; ++i) {
    in.push_back(flatten(to_batch_first(inputs[i], axes[i], n), 0, 1));
  }
  if (with_stats_) {
    // The form that keeps each row's log-sum-exp (q, k, v only; made under
    // vjp, as in grad of vmap) stays that form, so that the backward still
    // reads the statistics: both outputs, batch-folded.
    auto p = std::make_shared<ScaledDotProductAttention>(
        stream(), fallback_, scale_, do_causal_, false, true);
    auto shapes = p->output_shapes(in);
    auto out = array::make_arrays(std::move(shapes), {in[0].dtype(), float32},
                                  std::move(p), std::move(in));
    return {{unflatten(out[0], 0, {n, B}), unflatten(out[1], 0, {n, B})},
            {0, 0}};
  }
  std::optional<array> mask, sinks;
  if (in.size() == 4) mask = in[3];
  if (has_sinks_) sinks = inputs.back();
  auto out = scaled_dot_product_attention(in[0], in[1], in[2], scale_,
                                          do_causal_ ? "causal" : "", mask,
                                          sinks, false, stream());
  return {{unflatten(out, 0, {n, B})}, {0}};
}

} // namespace kiln::fast
