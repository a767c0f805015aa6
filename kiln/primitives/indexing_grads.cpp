// Transformation rules of Gather, GatherAxis and ScatterAxis. A gather's
// cotangent is scatter-added back at the starts the gather actually read
// (wrapped and clamped); vmap adds an index for the batch axis when both
// the source and the indices are mapped.
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/index_grad_utils.h"
#include "kiln/primitives/indexing.h"

namespace kiln {

using detail::tangent_of;
using detail::to_batch_first;

// ---- Gather: inputs a, idx... ----
std::vector<array> Gather::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>&) {
  const array& a = primals[0];
  std::vector<array> out;
  for (int i : argnums) {
    if (i != 0) {
      out.push_back(zeros_like(primals[i]));
      continue;
    }
    std::vector<array> starts;
    for (size_t k = 0; k < axes_.size(); ++k) {
      int ax = axes_[k];
      starts.push_back(detail::clamped_starts(primals[k + 1], a, ax,
                                              slice_sizes_[ax]));
    }
    out.push_back(scatter_add(zeros_like(a), starts, cotangents[0], axes_));
  }
  return out;
}

std::vector<array> Gather::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  auto inputs = primals;
  inputs[0] = tangent_of(0, primals, tangents, argnums);
  Dtype dtype = inputs[0].dtype();
  return {array(output_shapes(primals)[0], dtype, shared_from_this(),
                std::move(inputs))};
}

std::pair<std::vector<array>, std::vector<int>> Gather::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  bool mapped_idx = false;
  for (size_t i = 1; i < inputs.size(); ++i) mapped_idx |= axes[i] >= 0;
  std::vector<int> gaxes;
  for (int ax : axes_) gaxes.push_back(ax + 1);
  Shape sizes = {b};
  sizes.insert(sizes.end(), slice_sizes_.begin(), slice_sizes_.end());
  std::vector<array> idx(inputs.begin() + 1, inputs.end());
  if (!mapped_idx) {
    // The whole batch axis is part of each slice; it lands after the index
    // dimensions.
    auto a = to_batch_first(inputs[0], axes[0], b);
    int ni = idx.empty() ? 0 : static_cast<int>(idx[0].ndim());
    return {{gather(a, idx, gaxes, sizes)}, {ni}};
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    idx[i - 1] = to_batch_first(inputs[i], axes[i], b);
  }
  if (axes[0] < 0) return {{gather(inputs[0], idx, axes_, slice_sizes_)}, {0}};
  // Both mapped: batch row r reads from source row r.
  auto a = to_batch_first(inputs[0], axes[0], b);
  int ni = static_cast<int>(idx[0].ndim());
  idx.insert(idx.begin(), detail::batch_index(idx[0].shape()));
  gaxes.insert(gaxes.begin(), 0);
  sizes[0] = 1;
  return {{squeeze(gather(a, idx, gaxes, sizes), ni)}, {0}};
}

// ---- GatherAxis: inputs a, idx ----
std::vector<array> GatherAxis::vjp(const std::vector<array>& primals,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>& argnums,
                                   const std::vector<array>&) {
  const array& a = primals[0];
  std::vector<array> out;
  for (int i : argnums) {
    if (i != 0) {
      out.push_back(zeros_like(primals[i]));
      continue;
    }
    auto idx = detail::clamped_starts(primals[1], a, axis_, 1);
    out.push_back(one_index_per_line(a, idx, cotangents[0])
                      ? picked_gradient(a, idx, cotangents[0])
                      : scatter_add_axis(zeros_like(a), idx, cotangents[0],
                                         axis_));
  }
  return out;
}

// One index per line along the axis, and a cotangent with a's other
// extents (so no line of a receives several cotangents): cross-entropy's
// pick of each row's target.
bool GatherAxis::one_index_per_line(const array& a, const array& idx,
                                    const array& cot) const {
  if (idx.shape(axis_) != 1 || cot.ndim() != a.ndim()) return false;
  for (int d = 0; d < static_cast<int>(a.ndim()); ++d) {
    if (d != axis_ && cot.shape(d) != a.shape(d)) return false;
  }
  return true;
}

// The cotangent where a position along the axis is its line's index, else
// 0: elementwise, so under compile it fuses into the gradient's consumers
// (cross-entropy's softmax term) instead of scattering into a zero-filled
// array that is then read back. Exact: each position takes at most one
// cotangent, as the scatter would add it to zero.
array GatherAxis::picked_gradient(const array& a, const array& idx,
                                  const array& cot) const {
  Shape line(a.ndim(), 1);
  line[axis_] = a.shape(axis_);
  auto position =
      reshape(arange(0.0, a.shape(axis_), 1.0, idx.dtype()), line);
  return where(equal(position, idx), cot, array(0, a.dtype()));
}

std::vector<array> GatherAxis::jvp(const std::vector<array>& primals,
                                   const std::vector<array>& tangents,
                                   const std::vector<int>& argnums) {
  auto t = tangent_of(0, primals, tangents, argnums);
  return {take_along_axis(t, primals[1], axis_)};
}

std::pair<std::vector<array>, std::vector<int>> GatherAxis::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // take_along_axis broadcasts a leading axis of size 1.
  auto a = detail::batch_first_or_one(inputs[0], axes[0]);
  auto idx = detail::batch_first_or_one(inputs[1], axes[1]);
  return {{take_along_axis(a, idx, axis_ + 1)}, {0}};
}

// ---- ScatterAxis: inputs a, idx, updates (reduce None or Sum) ----
std::vector<array> ScatterAxis::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<array>&) {
  const array& idx = primals[1];
  const array& upd = primals[2];
  const array& cot = cotangents[0];
  if (reduce_ != ScatterReduce::None && reduce_ != ScatterReduce::Sum) {
    throw std::invalid_argument(std::string("[") + name() +
                                "] has no vjp (only put and add do).");
  }
  bool put = reduce_ == ScatterReduce::None;
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // put: overwritten positions get no gradient.
      out.push_back(put ? put_along_axis(cot, idx, zeros_like(upd), axis_)
                        : cot);
    } else if (i == 1) {
      out.push_back(zeros_like(idx));
    } else {
      // An update gets the cotangent of where it landed: only if it was
      // written (in range) and, for put, not overwritten by a later one.
      array kept = array(true);
      if (put) {
        auto ids = detail::element_ids(upd.shape());
        auto owner = put_along_axis(full(primals[0].shape(), -1, ids.dtype()),
                                    idx, ids, axis_);
        kept = equal(take_along_axis(owner, idx, axis_), ids);
      } else {
        kept = detail::starts_in_range(idx, primals[0], axis_, 1);
      }
      out.push_back(
          where(kept, take_along_axis(cot, idx, axis_), zeros_like(upd)));
    }
  }
  return out;
}

std::vector<array> ScatterAxis::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  auto ta = tangent_of(0, primals, tangents, argnums);
  auto tu = tangent_of(2, primals, tangents, argnums);
  return {
      array(ta.shape(), ta.dtype(), shared_from_this(), {ta, primals[1], tu})};
}

std::pair<std::vector<array>, std::vector<int>> ScatterAxis::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  auto a = to_batch_first(inputs[0], axes[0], b);
  auto idx = detail::batch_first_or_one(inputs[1], axes[1]);
  Shape target = a.shape();
  target[axis_ + 1] = idx.shape(axis_ + 1);
  idx = broadcast_to(idx, target);
  auto upd =
      broadcast_to(detail::batch_first_or_one(inputs[2], axes[2]), target);
  auto p = std::make_shared<ScatterAxis>(stream(), reduce_, axis_ + 1);
  return {{array(a.shape(), a.dtype(), std::move(p), {a, idx, upd})}, {0}};
}

} // namespace kiln
