// Transformation rules of Scatter. Every reduction is linearized as
//   d out = w_a * d a + scatter_add(d updates * w_u)
// with w_a shaped like a and w_u like the updates; an update slice that the
// scatter dropped (out of range) gets w_u = 0.
//  - sum:  w_a = 1, w_u = 1.
//  - prod: w_a = product of the updates at the position, w_u = a times the
//    product of the other updates there (exact with zeros: no division by
//    a zero update).
//  - max / min: the gradient is shared equally between the source value and
//    every update equal to the result at that position (ties split it).
//  - none: the update written last at a position (the one the forward kept)
//    gets its gradient; overwritten source values and overwritten updates
//    get zero.
#include <optional>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/index_grad_utils.h"
#include "kiln/primitives/indexing.h"

namespace kiln {

using detail::tangent_of;
using detail::to_batch_first;

namespace {

array scatter_with(ScatterReduce r, const array& a,
                   const std::vector<array>& idx, const array& upd,
                   const std::vector<int>& axes) {
  switch (r) {
    case ScatterReduce::Sum: return scatter_add(a, idx, upd, axes);
    case ScatterReduce::Prod: return scatter_prod(a, idx, upd, axes);
    case ScatterReduce::Max: return scatter_max(a, idx, upd, axes);
    case ScatterReduce::Min: return scatter_min(a, idx, upd, axes);
    default: return scatter(a, idx, upd, axes);
  }
}

// A scatter's inputs taken apart: source, indices, updates, and the shape
// of one update slice.
struct Parts {
  const array& a;
  std::vector<array> idx;
  const array& upd;
  Shape slice;
  const std::vector<int>& axes;

  Parts(const std::vector<array>& in, const std::vector<int>& ax)
      : a(in[0]),
        idx(in.begin() + 1, in.end() - 1),
        upd(in.back()),
        slice(upd.shape().end() - a.ndim(), upd.shape().end()),
        axes(ax) {}

  // x at every update element's destination (shaped like the updates).
  array at_updates(const array& x) const { return gather(x, idx, axes, slice); }
  // Whether each update slice was written, broadcastable to the updates.
  array written() const {
    array ok(true);
    for (size_t k = 0; k < idx.size(); ++k) {
      int ax = axes[k];
      ok = logical_and(ok,
                       detail::starts_in_range(idx[k], a, ax, slice[ax]));
    }
    Shape s = ok.shape();
    s.insert(s.end(), a.ndim(), 1);
    return reshape(ok, s);
  }
  // For None: whether each update element is the one the scatter kept.
  array kept() const {
    auto ids = detail::element_ids(upd.shape());
    auto owner = scatter(full(a.shape(), -1, ids.dtype()), idx, ids, axes);
    return equal(at_updates(owner), ids);
  }
  array add_at(const array& u) const {
    return scatter_add(zeros_like(a), idx, u, axes);
  }
};

struct Weights {
  std::optional<array> wa; // absent: 1
  array wu;
};

// w_a and w_u of the linearization (not for None); out is the forward
// result.
Weights weights(ScatterReduce r, const Parts& p, const array& out) {
  const array& a = p.a;
  const array& u = p.upd;
  auto zero_u = zeros_like(u);
  if (r == ScatterReduce::Sum)
    return {std::nullopt, where(p.written(), ones_like(u), zero_u)};
  if (r == ScatterReduce::Prod) {
    // Zero updates are counted apart so no product is divided by zero.
    auto z = equal(u, zero_u);
    auto nonzero = where(z, ones_like(u), u);
    auto prod_nz = scatter_prod(ones_like(a), p.idx, nonzero, p.axes);
    auto zeros_at = p.add_at(astype(z, a.dtype()));
    auto wa = where(zeros_at > 0, zeros_like(a), prod_nz);
    auto gz = p.at_updates(zeros_at);
    auto gp = p.at_updates(prod_nz);
    auto others = where(z, where(gz == 1, gp, zero_u),
                        where(gz == 0, divide(gp, nonzero), zero_u));
    auto wu = where(p.written(), multiply(p.at_updates(a), others), zero_u);
    return {wa, wu};
  }
  // Max / Min: share among the source and the updates equal to the result.
  auto ma = astype(equal(a, out), a.dtype());
  auto mu =
      astype(logical_and(equal(u, p.at_updates(out)), p.written()), a.dtype());
  auto count = maximum(add(ma, p.add_at(mu)), ones_like(a));
  return {divide(ma, count), divide(mu, p.at_updates(count))};
}

} // namespace

std::vector<array> Scatter::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  Parts p(primals, axes_);
  const array& cot = cotangents[0];
  int last = static_cast<int>(primals.size()) - 1;
  std::optional<Weights> w;
  if (reduce_ != ScatterReduce::None) w = weights(reduce_, p, outputs[0]);
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      if (!w) {
        out.push_back(scatter(cot, p.idx, zeros_like(p.upd), axes_));
      } else {
        out.push_back(w->wa ? multiply(cot, *w->wa) : cot);
      }
    } else if (i == last) {
      auto g = p.at_updates(cot);
      out.push_back(w ? multiply(g, w->wu)
                      : where(p.kept(), g, zeros_like(p.upd)));
    } else {
      out.push_back(zeros_like(primals[i]));
    }
  }
  return out;
}

std::vector<array> Scatter::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  Parts p(primals, axes_);
  int last = static_cast<int>(primals.size()) - 1;
  auto ta = tangent_of(0, primals, tangents, argnums);
  auto tu = tangent_of(last, primals, tangents, argnums);
  if (reduce_ == ScatterReduce::None) {
    // The tangents follow the values: the same scatter.
    return {scatter(ta, p.idx, tu, axes_)};
  }
  array out(p.a.shape(), p.a.dtype(), shared_from_this(), primals);
  auto w = weights(reduce_, p, out);
  auto t = w.wa ? multiply(ta, *w.wa) : ta;
  return {add(t, p.add_at(multiply(tu, w.wu)))};
}

std::pair<std::vector<array>, std::vector<int>> Scatter::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  int last = static_cast<int>(inputs.size()) - 1;
  bool mapped_idx = false;
  for (int i = 1; i < last; ++i) mapped_idx |= axes[i] >= 0;
  auto a = to_batch_first(inputs[0], axes[0], b);
  // Index dimensions of the updates, counted without batch axes.
  int ni = static_cast<int>(inputs[last].ndim()) - (axes[last] >= 0) -
           (static_cast<int>(inputs[0].ndim()) - (axes[0] >= 0));
  std::vector<int> saxes;
  for (int ax : axes_) saxes.push_back(ax + 1);
  std::vector<array> idx(inputs.begin() + 1, inputs.end() - 1);
  if (!mapped_idx) {
    // Each update slice spans the whole batch axis, which sits after the
    // index dimensions of the updates.
    const array& u = inputs[last];
    array upd = u;
    if (axes[last] >= 0) {
      upd = moveaxis(u, axes[last], ni);
    } else {
      Shape shape = u.shape();
      shape.insert(shape.begin() + ni, b);
      upd = broadcast_to(expand_dims(u, ni), shape);
    }
    return {{scatter_with(reduce_, a, idx, upd, saxes)}, {0}};
  }
  for (int i = 1; i < last; ++i) {
    idx[i - 1] = to_batch_first(inputs[i], axes[i], b);
  }
  // Batch row r writes into row r only: an index for the batch axis.
  idx.insert(idx.begin(), detail::batch_index(idx[0].shape()));
  saxes.insert(saxes.begin(), 0);
  auto upd = expand_dims(to_batch_first(inputs[last], axes[last], b), ni + 1);
  return {{scatter_with(reduce_, a, idx, upd, saxes)}, {0}};
}

} // namespace kiln
