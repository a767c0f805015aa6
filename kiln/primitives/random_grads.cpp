// Transformation rules of the random primitives. Draws carry no gradient
// with respect to their keys; vmap over keys draws with every key at once,
// as MLX does, so a mapped draw equals the loop over the keys.
#include <cmath>
#include <numbers>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/random.h"

namespace kiln {

using detail::batch_first;
using detail::to_batch_first;

// ---- RandomBits -------------------------------------------------------------

std::vector<array> RandomBits::vjp(const std::vector<array>& primals,
                                   const std::vector<array>&,
                                   const std::vector<int>& argnums,
                                   const std::vector<array>&) {
  return {zeros_like(primals[0])};
}

std::vector<array> RandomBits::jvp(const std::vector<array>& primals,
                                   const std::vector<array>&,
                                   const std::vector<int>&) {
  Dtype dt = width_ == 4 ? uint32 : width_ == 2 ? uint16 : uint8;
  return {zeros(shape_, dt)};
}

std::pair<std::vector<array>, std::vector<int>> RandomBits::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // The key pair stays last; the mapped keys lead, and each draws shape_.
  auto keys = batch_first(inputs[0], axes[0]);
  Shape shape = shape_;
  shape.insert(shape.begin(), keys.shape(0));
  Dtype dt = width_ == 4 ? uint32 : width_ == 2 ? uint16 : uint8;
  array out(shape, dt, std::make_shared<RandomBits>(stream(), shape, width_),
            {keys});
  return {{out}, {0}};
}

// ---- RandomPermutation ------------------------------------------------------

std::vector<array> RandomPermutation::vjp(const std::vector<array>& primals,
                                          const std::vector<array>& cotangents,
                                          const std::vector<int>& argnums,
                                          const std::vector<array>&) {
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(zeros_like(primals[0]));
      continue;
    }
    // The cotangent goes back through the inverse permutation: sorting by
    // the drawn order p (distinct values) inverts it.
    const array& keys = primals[0];
    int n = static_cast<int>(keys.size());
    auto prim = std::make_shared<RandomPermutation>(stream(), 0);
    array p({n}, uint32, prim, {keys, arange(0.0, n, uint32)});
    out.push_back(array(cotangents[0].shape(), cotangents[0].dtype(),
                        std::make_shared<RandomPermutation>(stream(), axis_),
                        {p, cotangents[0]}));
  }
  return out;
}

std::vector<array> RandomPermutation::jvp(const std::vector<array>& primals,
                                          const std::vector<array>& tangents,
                                          const std::vector<int>& argnums) {
  if (argnums.back() != 1) return {zeros_like(primals[1])};
  const array& t = tangents.back();
  return {array(t.shape(), t.dtype(), shared_from_this(), {primals[0], t})};
}

std::pair<std::vector<array>, std::vector<int>> RandomPermutation::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  if (axes[0] < 0) {
    auto x = batch_first(inputs[1], axes[1]);
    array out(x.shape(), x.dtype(),
              std::make_shared<RandomPermutation>(stream(), axis_ + 1),
              {inputs[0], x});
    return {{out}, {0}};
  }
  // One key vector per batch element: each row's stable sorting order, then
  // a gather along the permuted axis.
  auto keys = batch_first(inputs[0], axes[0]);
  int n = keys.shape(0);
  auto x = to_batch_first(inputs[1], axes[1], n);
  auto order = argsort(keys, 1, stream());
  Shape ishape(x.ndim(), 1);
  ishape[0] = n;
  ishape[axis_ + 1] = keys.shape(1);
  return {{take_along_axis(x, reshape(order, ishape), axis_ + 1, stream())},
          {0}};
}

// ---- Float32Erf -------------------------------------------------------------

namespace {

// d erf(x)/dx = 2/sqrt(pi) exp(-x^2); d erfinv(x)/dx = sqrt(pi)/2 exp(y^2).
array erf_partial(bool inverse, const array& x, const array& y) {
  Dtype dt = x.dtype();
  if (inverse) {
    return multiply(array(std::sqrt(std::numbers::pi) / 2, dt), exp(square(y)));
  }
  return multiply(array(2 / std::sqrt(std::numbers::pi), dt),
                  exp(negative(square(x))));
}

} // namespace

std::vector<array> Float32Erf::vjp(const std::vector<array>& primals,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>&,
                                   const std::vector<array>& outputs) {
  return {
      multiply(cotangents[0], erf_partial(inverse_, primals[0], outputs[0]))};
}

std::vector<array> Float32Erf::jvp(const std::vector<array>& primals,
                                   const std::vector<array>& tangents,
                                   const std::vector<int>&) {
  array y(primals[0].shape(), primals[0].dtype(), shared_from_this(), primals);
  return {multiply(tangents[0], erf_partial(inverse_, primals[0], y))};
}

std::pair<std::vector<array>, std::vector<int>> Float32Erf::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // Elementwise: the batch axis stays where it is.
  const array& x = inputs[0];
  return {{array(x.shape(), x.dtype(), shared_from_this(), {x})}, {axes[0]}};
}

} // namespace kiln
