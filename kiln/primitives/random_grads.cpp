// Transformation rules of the random primitives. Draws carry no gradient
// with respect to their keys; vmap over keys draws with every key at once,
// as MLX does, so a mapped draw equals the loop over the keys.
#include <cmath>
#include <numbers>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/random.h"

namespace kiln {

using detail::batch_first;

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
