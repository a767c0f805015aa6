// Transformation rules of the layout primitives.
#include <algorithm>
#include <numeric>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/shape.h"

namespace kiln {

using detail::batch_first;
using detail::to_batch_first;
using detail::with_batch;

// ---- Broadcast ----
std::vector<array> Broadcast::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  const Shape& in = primals[0].shape();
  int diff = static_cast<int>(shape_.size() - in.size());
  std::vector<int> axes;
  for (int i = 0; i < static_cast<int>(shape_.size()); ++i) {
    if (i < diff || (in[i - diff] == 1 && shape_[i] != 1)) axes.push_back(i);
  }
  return {reshape(sum(cotangents[0], axes, true), in)};
}

std::vector<array> Broadcast::jvp(const std::vector<array>&,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {broadcast_to(tangents[0], shape_)};
}

std::pair<std::vector<array>, std::vector<int>> Broadcast::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = batch_first(inputs[0], axes[0]);
  int b = x.shape(0);
  // (B, in...) -> (B, 1, ..., 1, in...) with as many ones as broadcast_to
  // prepends, then broadcast.
  Shape padded = {b};
  padded.insert(padded.end(), shape_.size() - (x.ndim() - 1), 1);
  padded.insert(padded.end(), x.shape().begin() + 1, x.shape().end());
  return {{broadcast_to(reshape(x, padded), with_batch(b, shape_))}, {0}};
}

// ---- BroadcastLike: inputs a, like ----
std::vector<array> BroadcastLike::vjp(const std::vector<array>& primals,
                                      const std::vector<array>& cotangents,
                                      const std::vector<int>& argnums,
                                      const std::vector<array>&) {
  const Shape& in = primals[0].shape();
  Shape out_shape = output_shapes(primals)[0];
  int diff = static_cast<int>(out_shape.size() - in.size());
  std::vector<int> axes;
  for (int i = 0; i < static_cast<int>(out_shape.size()); ++i) {
    if (i < diff || (in[i - diff] == 1 && out_shape[i] != 1)) axes.push_back(i);
  }
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(
          squeeze(sum(cotangents[0], axes, true),
                  std::vector<int>(axes.begin(), axes.begin() + diff)));
    } else {
      out.push_back(zeros_like(primals[1]));
    }
  }
  return out;
}

std::vector<array> BroadcastLike::jvp(const std::vector<array>& primals,
                                      const std::vector<array>& tangents,
                                      const std::vector<int>& argnums) {
  // Only a's tangent moves the result.
  if (argnums[0] != 0) {
    return {zeros_like(array(output_shapes(primals)[0], primals[0].dtype(),
                             shared_from_this(), primals))};
  }
  std::vector<array> in{tangents[0], primals[1]};
  Shape shape = output_shapes(in)[0];
  return {array(std::move(shape), tangents[0].dtype(), shared_from_this(),
                std::move(in))};
}

std::pair<std::vector<array>, std::vector<int>> BroadcastLike::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const array& a = inputs[0];
  const array& like = inputs[1];
  int b = detail::batch_size(inputs, axes);
  // Both batch-first; the shorter padded with ones after its batch axis
  // (a's trailing `keep` axes, or like's shape, stay aligned at the end).
  // With keep > 0 the batch axes broadcast both ways, so an unmapped input
  // takes a batch axis of 1 (a fixed batch size would not follow a new one
  // under shapeless compile); with keep = 0 like gives the whole shape.
  auto a1 = detail::batch_first_or_one(a, axes[0]);
  auto l1 = keep_ > 0 ? detail::batch_first_or_one(like, axes[1])
                      : to_batch_first(like, axes[1], b);
  auto pad_to = [](array x, size_t rank) {
    std::vector<int> pad;
    for (size_t k = x.ndim(); k < rank; ++k) {
      pad.push_back(static_cast<int>(k - x.ndim() + 1));
    }
    return expand_dims(x, pad);
  };
  size_t rank = std::max(a1.ndim(), l1.ndim());
  a1 = pad_to(a1, rank);
  if (keep_ > 0) l1 = pad_to(l1, rank);
  std::vector<array> in{a1, l1};
  Shape shape = output_shapes(in)[0];
  array out(std::move(shape), a.dtype(), shared_from_this(), std::move(in));
  return {{out}, {0}};
}

// ---- Reshape: inputs a (and like) ----
std::vector<array> Reshape::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>&) {
  std::vector<array> out;
  for (int i : argnums) {
    out.push_back(
        i == 0 ? detail::reshape_like(cotangents[0], primals[0], stream())
               : zeros_like(primals[1]));
  }
  return out;
}

std::vector<array> Reshape::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  if (argnums[0] != 0) return {zeros_like(primals[1])};
  if (primals.size() == 2) {
    return {array(primals[1].shape(), tangents[0].dtype(), shared_from_this(),
                  {tangents[0], primals[1]})};
  }
  // The tangent has the input's shape: the same request (a -1 included)
  // gives the output's, at any shape a shapeless replay brings.
  return {reshape(tangents[0], requested_)};
}

std::pair<std::vector<array>, std::vector<int>> Reshape::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  auto x = to_batch_first(inputs[0], axes[0], b);
  if (inputs.size() == 1) {
    return {{reshape(x, with_batch(b, shape_))}, {0}};
  }
  auto like = to_batch_first(inputs[1], axes[1], b);
  return {{array(like.shape(), x.dtype(), shared_from_this(), {x, like})},
          {0}};
}

// ---- Squeeze and ExpandDims: each undoes the other ----
namespace {

std::vector<int> shifted(const std::vector<int>& axes) {
  std::vector<int> out;
  for (int a : axes) out.push_back(a + 1);
  return out;
}

} // namespace

std::vector<array> Squeeze::vjp(const std::vector<array>&,
                                const std::vector<array>& cotangents,
                                const std::vector<int>&,
                                const std::vector<array>&) {
  return {expand_dims(cotangents[0], axes_)};
}

std::vector<array> Squeeze::jvp(const std::vector<array>&,
                                const std::vector<array>& tangents,
                                const std::vector<int>&) {
  return {squeeze(tangents[0], axes_)};
}

std::pair<std::vector<array>, std::vector<int>> Squeeze::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = batch_first(inputs[0], axes[0]);
  return {{squeeze(x, shifted(axes_))}, {0}};
}

std::vector<array> ExpandDims::vjp(const std::vector<array>&,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>&,
                                   const std::vector<array>&) {
  return {squeeze(cotangents[0], axes_)};
}

std::vector<array> ExpandDims::jvp(const std::vector<array>&,
                                   const std::vector<array>& tangents,
                                   const std::vector<int>&) {
  return {expand_dims(tangents[0], axes_)};
}

std::pair<std::vector<array>, std::vector<int>> ExpandDims::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = batch_first(inputs[0], axes[0]);
  return {{expand_dims(x, shifted(axes_))}, {0}};
}

// ---- Transpose ----
std::vector<array> Transpose::vjp(const std::vector<array>&,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  std::vector<int> inverse(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i)
    inverse[axes_[i]] = static_cast<int>(i);
  return {transpose(cotangents[0], inverse)};
}

std::vector<array> Transpose::jvp(const std::vector<array>&,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {transpose(tangents[0], axes_)};
}

std::pair<std::vector<array>, std::vector<int>> Transpose::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = batch_first(inputs[0], axes[0]);
  std::vector<int> perm = {0};
  for (int a : axes_) perm.push_back(a + 1);
  return {{transpose(x, perm)}, {0}};
}

// ---- Identities: Copy and Contiguous ----
#define KILN_IDENTITY_GRADS(Name, apply)                                     \
  std::vector<array> Name::vjp(const std::vector<array>&,                    \
                               const std::vector<array>& cotangents,         \
                               const std::vector<int>&,                      \
                               const std::vector<array>&) {                  \
    return {cotangents[0]};                                                  \
  }                                                                          \
  std::vector<array> Name::jvp(const std::vector<array>&,                    \
                               const std::vector<array>& tangents,           \
                               const std::vector<int>&) {                    \
    return {tangents[0]};                                                    \
  }                                                                          \
  std::pair<std::vector<array>, std::vector<int>> Name::vmap(                \
      const std::vector<array>& inputs, const std::vector<int>& axes) {      \
    const array& x = inputs[0];                                              \
    return {{apply}, {axes[0]}};                                             \
  }
KILN_IDENTITY_GRADS(Copy, x)
KILN_IDENTITY_GRADS(Contiguous, contiguous(x, allow_col_major_))
#undef KILN_IDENTITY_GRADS

// ---- View ----
std::vector<array> View::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>&,
                             const std::vector<array>&) {
  if (primals[0].itemsize() != dtype_.size) {
    detail::invalid("view",
                    "a view that changes the itemsize has no gradient.");
  }
  return {view(cotangents[0], primals[0].dtype())};
}

std::vector<array> View::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>&) {
  if (primals[0].itemsize() != dtype_.size) {
    detail::invalid("view",
                    "a view that changes the itemsize has no gradient.");
  }
  return {view(tangents[0], dtype_)};
}

std::pair<std::vector<array>, std::vector<int>> View::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{view(batch_first(inputs[0], axes[0]), dtype_)}, {0}};
}

} // namespace kiln
