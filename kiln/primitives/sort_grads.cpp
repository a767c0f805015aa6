// Transformation rules of sorting and partitioning. Values move by a
// permutation, so a cotangent goes back through it (scatter along the axis)
// and a tangent follows it (gather). Positions (argsort, argpartition) have
// no gradient.
#include "kiln/ops/creation.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/primitives/sort.h"

namespace kiln {

namespace {

array batch_first(const array& x, int axis) {
  return axis == 0 ? x : moveaxis(x, axis, 0);
}

} // namespace

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

} // namespace kiln
