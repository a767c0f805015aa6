// kiln::fast ops composed from others (no fused kernel on the CPU, as
// MLX's CPU path): the cross-entropy loss and the gated delta rule.
#include <string>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fast.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"

namespace kiln::fast {

using kiln::detail::describe;
using kiln::detail::invalid;
using kiln::detail::shape_str;

array cross_entropy(const array& logits, const array& targets,
                    StreamOrDevice s) {
  const char* op = "fast::cross_entropy";
  if (!is_floating_point(logits.dtype()) || logits.ndim() == 0) {
    invalid(op, "logits must be a floating array with a class axis, got " +
                    describe(logits) + ".");
  }
  if (!is_integral(targets.dtype()) || targets.dtype() == bool_) {
    invalid(op, "targets must be integer class indices, got " +
                    describe(targets) + ".");
  }
  Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != rows) {
    invalid(op, "targets (" + describe(targets) +
                    ") must have the shape of logits without the last axis " +
                    shape_str(rows) + " (logits: " + describe(logits) + ").");
  }
  auto picked = take_along_axis(logits, expand_dims(targets, -1, s), -1, s);
  auto loss =
      subtract(logsumexp(logits, -1, false, s), squeeze(picked, -1, s), s);
  return astype(loss, float32, s);
}

namespace {

// Step t of a (B, T, ...) array, as (B, ...).
array step(const array& x, int t, StreamOrDevice s) {
  Shape start(x.ndim(), 0), stop = x.shape();
  start[1] = t;
  stop[1] = t + 1;
  return squeeze(slice(x, start, stop, s), 1, s);
}

void check_delta_args(const array& q, const array& k, const array& v,
                      const array& gamma, const array& beta,
                      const std::optional<array>& state,
                      const std::optional<array>& mask) {
  const char* op = "fast::gated_delta_update";
  auto all = [&] {
    std::string m = "q " + describe(q) + ", k " + describe(k) + ", v " +
                    describe(v) + ", gamma " + describe(gamma) + ", beta " +
                    describe(beta);
    if (state) m += ", state " + describe(*state);
    if (mask) m += ", mask " + describe(*mask);
    return m;
  };
  for (const array* x : {&q, &k, &v, &gamma, &beta}) {
    if (!is_floating_point(x->dtype())) {
      invalid(op, "inputs must be floating arrays; got " + all() + ".");
    }
  }
  if (q.ndim() != 4 || k.shape() != q.shape() || v.ndim() != 4) {
    invalid(op, "q and k must be (B, T, Hk, Dk) and v (B, T, Hv, Dv); got " +
                    all() + ".");
  }
  int b = q.shape(0), t = q.shape(1), hk = q.shape(2), dk = q.shape(3);
  int hv = v.shape(2), dv = v.shape(3);
  if (v.shape(0) != b || v.shape(1) != t || hk == 0 || hv % hk != 0) {
    invalid(op,
            "v must share B and T with q and have a multiple of q's "
            "heads; got " +
                all() + ".");
  }
  Shape gates{b, t, hv};
  if (gamma.shape() != gates || beta.shape() != gates) {
    invalid(op, "gamma and beta must be (B, T, Hv) = " + shape_str(gates) +
                    "; got " + all() + ".");
  }
  if (state && state->shape() != Shape{b, hv, dv, dk}) {
    invalid(op, "the state must be (B, Hv, Dv, Dk) = " +
                    shape_str({b, hv, dv, dk}) + "; got " + all() + ".");
  }
  if (mask && (mask->dtype() != bool_ || mask->shape() != Shape{b, t})) {
    invalid(op, "the mask must be a bool array of shape (B, T) = " +
                    shape_str({b, t}) + "; got " + all() + ".");
  }
}

} // namespace

std::pair<array, array> gated_delta_update(const array& q, const array& k,
                                           const array& v, const array& gamma,
                                           const array& beta,
                                           const std::optional<array>& state,
                                           const std::optional<array>& mask,
                                           StreamOrDevice s) {
  check_delta_args(q, k, v, gamma, beta, state, mask);
  int b = q.shape(0), t_len = q.shape(1), hk = q.shape(2), dk = q.shape(3);
  int hv = v.shape(2), dv = v.shape(3);
  Dtype dt = q.dtype() == float64 ? float64 : float32;
  // Each key head serves hv / hk value heads: repeat the keys and queries.
  auto heads = [&](const array& x) {
    auto y = astype(x, dt, s);
    return hv == hk ? y : repeat(y, hv / hk, 2, s);
  };
  auto qh = heads(q), kh = heads(k);
  auto vf = astype(v, dt, s), gf = astype(gamma, dt, s),
       bf = astype(beta, dt, s);
  array st = state ? astype(*state, dt, s) : zeros({b, hv, dv, dk}, dt, s);
  std::vector<array> outs;
  for (int t = 0; t < t_len; ++t) {
    auto kt = step(kh, t, s), qt = step(qh, t, s); // (B, Hv, Dk)
    auto g = expand_dims(step(gf, t, s), {-1, -2}, s);
    auto next = multiply(st, g, s);
    auto kv = squeeze(matmul(next, expand_dims(kt, -1, s), s), -1, s);
    auto delta = multiply(subtract(step(vf, t, s), kv, s),
                          expand_dims(step(bf, t, s), -1, s), s);
    next =
        add(next,
            multiply(expand_dims(delta, -1, s), expand_dims(kt, -2, s), s), s);
    auto out = squeeze(matmul(next, expand_dims(qt, -1, s), s), -1, s);
    if (mask) {
      auto on = reshape(step(*mask, t, s), {b, 1, 1, 1}, s);
      next = where(on, next, st, s);
      out = where(squeeze(on, -1, s), out, zeros_like(out, s), s);
    }
    st = next;
    outs.push_back(out);
  }
  if (outs.empty()) return {zeros({b, 0, hv, dv}, q.dtype(), s), st};
  return {astype(stack(outs, 1, s), q.dtype(), s), st};
}

} // namespace kiln::fast
