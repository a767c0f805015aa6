// scaled_dot_product_attention: argument checks and the fallback graph.
#include <limits>

#include "kiln/config.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fast.h"
#include "kiln/ops/fast_impl.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/fast.h"
#include "kiln/transforms/trace.h"

namespace kiln::fast {

using kiln::detail::describe;
using kiln::detail::invalid;
using kiln::detail::shape_str;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// The most negative finite value of dt: what a false mask entry scores.
array lowest(Dtype dt) {
  return array(dt == float64 ? std::numeric_limits<double>::lowest()
                             : std::numeric_limits<float>::lowest(),
               dt);
}

struct Config {
  float scale;
  int n_q, n_kv;
  bool causal, has_mask, has_sinks;
  bool with_stats = false; // also each row's log-sum-exp (float32)
};

// softmax(q k^T * scale + mask) v in the accumulation dtype, with sinks as
// one extra logit per head that joins the max and the denominator only.
// (Lq, Lk): query i (aligned to the last keys) sees keys j <= Lk - Lq + i.
// While a shapeless compile traces q and k, the positions are counted from
// ones shaped like a row of each (cumsums), so the mask follows new lengths
// on replay; otherwise they are aranges.
array causal_mask(const array& q, const array& k, Stream s) {
  if (!(kiln::detail::shape_follows_replay(q) &&
        kiln::detail::shape_follows_replay(k))) {
    int lq = q.shape(-2), lk = k.shape(-2);
    auto qi = expand_dims(arange(lk - lq, lk, 1, s), 1, s);
    auto ki = expand_dims(arange(0, lk, 1, s), 0, s);
    return greater_equal(qi, ki, s);
  }
  // One position vector along axis -2 of x, ones shaped like it.
  auto ones_along = [&](const array& x) {
    Shape start(x.ndim(), 0), stop(x.ndim(), 1);
    stop[x.ndim() - 2] = slice_end;
    auto col = reshape(slice(x, start, stop, s), {-1}, s);
    return ones_like(astype(col, int32, s), s);
  };
  auto oq = ones_along(q), ok = ones_along(k);
  auto ki = cumsum(ok, 0, false, false, s);                 // 0 .. Lk-1
  auto qi = subtract(sum(ok, false, s), cumsum(oq, 0, true, true, s), s);
  return greater_equal(expand_dims(qi, 1, s), expand_dims(ki, 0, s), s);
}

std::vector<array> sdpa_fallback(std::vector<array> in, Config c, Stream s) {
  Dtype t = in[0].dtype(), acc = detail::acc_dtype(t);
  auto q = multiply(array(c.scale, t), in[0], s);
  auto k = in[1];
  auto v = in[2];
  int rep = c.n_q / c.n_kv;
  if (rep > 1) {
    q = unflatten(q, 1, {c.n_kv, rep}, s);
    k = expand_dims(k, 2, s);
    v = expand_dims(v, 2, s);
  }
  auto scores =
      astype(matmul(q, swapaxes(k, -1, -2, s), s), acc, s);
  if (c.causal || c.has_mask) {
    array mask(false);
    if (c.causal) {
      mask = causal_mask(q, k, s);
    } else {
      mask = in[3];
      if (rep > 1) mask = unflatten(mask, 1, {c.n_kv, rep}, s);
    }
    scores = mask.dtype() == bool_ ? where(mask, scores, lowest(acc), s)
                                   : add(scores, astype(mask, acc, s), s);
  }
  auto m = max(scores, -1, true, s);
  array sink(0.0f);
  if (c.has_sinks) {
    Shape shape = rep > 1 ? Shape{1, c.n_kv, rep, 1, 1} : Shape{1, c.n_q, 1, 1};
    sink = reshape(astype(in.back(), acc, s), shape, s);
    m = maximum(m, sink, s);
  }
  m = stop_gradient(m, s);
  auto e = exp(subtract(scores, m, s), s);
  auto den = sum(e, -1, true, s);
  if (c.has_sinks) den = add(den, exp(subtract(sink, m, s), s), s);
  auto p = astype(divide(e, den, s), t, s);
  auto out = matmul(p, v, s);
  if (rep > 1) out = flatten(out, 1, 2, s);
  if (!c.with_stats) return {out};
  auto lse = squeeze(add(m, log(den, s), s), -1, s);
  if (rep > 1) lse = flatten(lse, 1, 2, s);
  return {out, astype(lse, float32, s)};
}

// The op's fallback: sdpa_fallback for configuration c on stream s.
Fallback fallback_for(Config c, Stream s) {
  return [c, s](std::vector<array> in) {
    return sdpa_fallback(std::move(in), c, s);
  };
}

} // namespace

array scaled_dot_product_attention(const array& queries, const array& keys,
                                   const array& values, float scale,
                                   const std::string& mask_mode,
                                   std::optional<array> mask_arr,
                                   const std::optional<array>& sinks,
                                   bool force_fused, StreamOrDevice s_) {
  for (auto* a : {&queries, &keys, &values}) {
    if (a->ndim() != 4) {
      invalid(kOp, "queries, keys and values must be 4-d (B, N, L, D); got " +
                       describe(*a) + ".");
    }
  }
  auto shapes = "queries " + describe(queries) + ", keys " + describe(keys) +
                ", values " + describe(values);
  if (mask_mode != "" && mask_mode != "causal" && mask_mode != "array") {
    invalid(kOp, "mask_mode must be '', 'array' or 'causal'; got '" +
                     mask_mode + "'.");
  }
  bool causal = mask_mode == "causal";
  if (causal && mask_arr) {
    invalid(kOp, "mask_mode 'causal' takes no mask array.");
  }
  int B = queries.shape(0), n_q = queries.shape(1), n_kv = keys.shape(1);
  if (keys.shape(0) != B || values.shape(0) != B) {
    invalid(kOp, "batch sizes differ: " + shapes + ".");
  }
  if (queries.shape(-1) != keys.shape(-1)) {
    invalid(kOp,
            "queries and keys need the same last dimension: " + shapes + ".");
  }
  if (values.shape(1) != n_kv || values.shape(2) != keys.shape(2)) {
    invalid(kOp,
            "keys and values need the same heads and length: " + shapes + ".");
  }
  if (n_kv == 0 || n_q % n_kv != 0) {
    invalid(kOp, "the query heads must be a multiple of the key/value heads: " +
                     shapes + ".");
  }
  Dtype t = promote_types(promote_types(queries.dtype(), keys.dtype()),
                          values.dtype());
  if (!is_floating_point(t)) {
    invalid(kOp, "needs floating inputs; got " + shapes + ".");
  }
  auto s = to_stream(s_);
  std::vector<array> inputs = {astype(queries, t, s), astype(keys, t, s),
                               astype(values, t, s)};
  bool has_mask = mask_arr.has_value();
  if (has_mask) {
    auto& m = *mask_arr;
    Shape target = {B, n_q, queries.shape(2), keys.shape(2)};
    bool fits = m.ndim() <= 4;
    for (size_t i = 0; fits && i < m.ndim(); ++i) {
      int d = m.shape()[i], want = target[4 - m.ndim() + i];
      fits = d == 1 || d == want;
    }
    if (!fits) {
      invalid(kOp, "the mask " + describe(m) + " does not broadcast to " +
                       shape_str(target) + ".");
    }
    if (m.dtype() != bool_ && promote_types(m.dtype(), t) != t) {
      invalid(kOp, "an additive mask must promote to " + dtype_name(t) +
                       "; got " + describe(m) + ".");
    }
    auto mm = m.dtype() == bool_ ? m : astype(m, t, s);
    inputs.push_back(broadcast_to(mm, target, s));
  }
  if (sinks) {
    if (sinks->ndim() != 1 || sinks->shape(0) != n_q ||
        promote_types(sinks->dtype(), t) != t) {
      invalid(kOp, "sinks must be 1-d with one value per query head (" +
                       std::to_string(n_q) + ") promoting to " + dtype_name(t) +
                       "; got " + describe(*sinks) + ".");
    }
    inputs.push_back(astype(*sinks, t, s));
  }
  Config c{scale, n_q, n_kv, causal, has_mask, sinks.has_value()};
#if KILN_HAS_CUDA
  // On the GPU: the graph when the fused kernels do not serve these shapes
  // well, and under a gradient transformation whose rule for the fused
  // primitive would rebuild the graph's forward anyway (training would pay
  // for both): jvp always, vjp unless the fused backward covers the inputs
  // (ScaledDotProductAttention::vjp then runs it).
  bool graph_for_grad =
      kiln::detail::in_jvp_tracing() ||
      (kiln::detail::in_grad_tracing() &&
       !ScaledDotProductAttention::gpu_fused_backward_fits(
           t, queries.shape(3), values.shape(3), c.has_sinks));
  if (s.device == Device::gpu && !force_fused &&
      (graph_for_grad || !ScaledDotProductAttention::gpu_fused_fits(
                             t, queries.shape(2), queries.shape(3),
                             values.shape(3), c.has_sinks))) {
    return sdpa_fallback(std::move(inputs), c, s)[0];
  }
#endif
  Shape out_shape = {B, n_q, queries.shape(2), values.shape(3)};
#if KILN_HAS_CUDA
  // Under vjp, where cuDNN will run the backward, the forward keeps each
  // row's log-sum-exp so that the backward need not run it again.
  c.with_stats = s.device == Device::gpu &&
                 kiln::detail::in_grad_tracing() && !has_mask &&
                 !c.has_sinks &&
                 ScaledDotProductAttention::gpu_keeps_stats(
                     t, queries.shape(2), keys.shape(2), queries.shape(3),
                     values.shape(3), causal);
#endif
  auto primitive = std::make_shared<ScaledDotProductAttention>(
      s, fallback_for(c, s), scale, causal, c.has_sinks, c.with_stats);
  if (!c.with_stats) {
    return array(std::move(out_shape), t, std::move(primitive),
                 std::move(inputs));
  }
  return array::make_arrays({out_shape, {B, n_q, queries.shape(2)}},
                            {t, float32}, std::move(primitive),
                            std::move(inputs))[0];
}

} // namespace kiln::fast
