// Transformation rules of sorting and partitioning. Values move by a
// permutation, so a cotangent goes back through it (scatter along the axis)
// and a tangent follows it (gather). Positions (argsort, argpartition) have
// no gradient.
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/sort.h"

namespace kiln {

using detail::batch_first;

// ---- Sort: out = take_along_axis(x, argsort(x)) ----
std::vector<array> Sort::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>&,
                             const std::vector<array>&) {
  const array& x = primals[0];
  return {
      scatter_add_axis(zeros_like(x), argsort(x, axis_), cotangents[0], axis_)};
}

std::vector<array> Sort::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {take_along_axis(tangents[0], argsort(primals[0], axis_), axis_)};
}

std::pair<std::vector<array>, std::vector<int>> Sort::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{sort(batch_first(inputs[0], axes[0]), axis_ + 1)}, {0}};
}

// ---- Partition ----
// The kernel does not say which element went where, and argpartition may
// order each side differently; so match values instead: the k-th smallest
// of the output is the k-th smallest of the input (stable sorts of both).
// Ties pair equal values, which carry the same derivative.
std::vector<array> Partition::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>& outputs) {
  const array& x = primals[0];
  auto by_rank =
      take_along_axis(cotangents[0], argsort(outputs[0], axis_), axis_);
  return {scatter_add_axis(zeros_like(x), argsort(x, axis_), by_rank, axis_)};
}

std::vector<array> Partition::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  const array& x = primals[0];
  array out(x.shape(), x.dtype(), shared_from_this(), primals);
  auto by_rank = take_along_axis(tangents[0], argsort(x, axis_), axis_);
  return {scatter_add_axis(zeros_like(tangents[0]), argsort(out, axis_),
                           by_rank, axis_)};
}

std::pair<std::vector<array>, std::vector<int>> Partition::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{partition(batch_first(inputs[0], axes[0]), kth_, axis_ + 1)}, {0}};
}

// ---- ArgSort, ArgPartition: integer positions, no gradient ----
std::vector<array> ArgSort::vjp(const std::vector<array>& primals,
                                const std::vector<array>&,
                                const std::vector<int>&,
                                const std::vector<array>&) {
  return {zeros_like(primals[0])};
}

std::vector<array> ArgSort::jvp(const std::vector<array>& primals,
                                const std::vector<array>&,
                                const std::vector<int>&) {
  return {zeros(primals[0].shape(), uint32)};
}

std::pair<std::vector<array>, std::vector<int>> ArgSort::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{argsort(batch_first(inputs[0], axes[0]), axis_ + 1)}, {0}};
}

std::vector<array> ArgPartition::vjp(const std::vector<array>& primals,
                                     const std::vector<array>&,
                                     const std::vector<int>&,
                                     const std::vector<array>&) {
  return {zeros_like(primals[0])};
}

std::vector<array> ArgPartition::jvp(const std::vector<array>& primals,
                                     const std::vector<array>&,
                                     const std::vector<int>&) {
  return {zeros(primals[0].shape(), uint32)};
}

std::pair<std::vector<array>, std::vector<int>> ArgPartition::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{argpartition(batch_first(inputs[0], axes[0]), kth_, axis_ + 1)},
          {0}};
}

// ---- SearchSorted: positions, so no gradient ----
std::vector<array> SearchSorted::vjp(const std::vector<array>& primals,
                                     const std::vector<array>&,
                                     const std::vector<int>& argnums,
                                     const std::vector<array>&) {
  std::vector<array> out;
  for (int i : argnums) out.push_back(zeros_like(primals[i]));
  return out;
}

std::vector<array> SearchSorted::jvp(const std::vector<array>& primals,
                                     const std::vector<array>&,
                                     const std::vector<int>&) {
  return {zeros(primals[1].shape(), uint32)};
}

std::pair<std::vector<array>, std::vector<int>> SearchSorted::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const array& seq = inputs[0];
  const array& values = inputs[1];
  if (axes[0] < 0) {
    // One sequence for the whole batch: the values keep their batch axis.
    auto p = std::make_shared<SearchSorted>(stream(), right_);
    return {{array(values.shape(), uint32, p, {seq, values})}, {axes[1]}};
  }
  // A sequence per batch element: count the elements before each value
  // (seq moves to (B, 1, ..., 1, n) against values (B, ..., 1)).
  auto s = batch_first(seq, axes[0]);
  int b = s.shape(0);
  Shape batched = values.shape();
  batched.insert(batched.begin(), b);
  auto v = axes[1] < 0 ? broadcast_to(expand_dims(values, 0), batched)
                       : batch_first(values, axes[1]);
  Shape sshape(v.ndim() + 1, 1);
  sshape[0] = b;
  sshape.back() = s.shape(1);
  auto se = reshape(s, sshape);
  auto ve = expand_dims(v, -1);
  auto before = right_ ? less_equal(se, ve) : less(se, ve);
  return {{astype(sum(before, -1), uint32)}, {0}};
}

} // namespace kiln
