// Transformation rules of Softmax (over the last axis). With y = softmax(x),
// dy = y * (dx - sum(dx * y)): the Jacobian is symmetric, so the vjp and the
// jvp share one expression.
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/softmax.h"

namespace kiln {

namespace {

// vmap of a last-axis primitive: a batch axis on the last axis moves first;
// any other stays where it is (also in the output).
std::pair<array, int> batch_off_last_axis(array x, int ax, Stream s) {
  if (ax == static_cast<int>(x.ndim()) - 1) return {moveaxis(x, ax, 0, s), 0};
  return {x, ax};
}

array softmax_product(const array& y, const array& v, Stream s) {
  auto dot = sum(multiply(v, y, s), -1, true, s);
  return multiply(y, subtract(v, dot, s), s);
}

} // namespace

std::vector<array> Softmax::vjp(const std::vector<array>&,
                                const std::vector<array>& cotangents,
                                const std::vector<int>&,
                                const std::vector<array>& outputs) {
  return {softmax_product(outputs[0], cotangents[0], stream())};
}

std::vector<array> Softmax::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>&) {
  array y(primals[0].shape(), primals[0].dtype(), shared_from_this(), primals);
  return {softmax_product(y, tangents[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> Softmax::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto [x, ax] = batch_off_last_axis(inputs[0], axes[0], stream());
  return {{array(x.shape(), x.dtype(), shared_from_this(), {x})}, {ax}};
}

// LogSumExp (over the last axis): with l = logsumexp(x), dl = sum(dx *
// softmax(x)) and softmax(x) = exp(x - l); the vjp spreads the cotangent
// over the row as g * exp(x - l).
namespace {

array logsumexp_softmax(const array& x, const array& l, Stream s) {
  return exp(subtract(x, expand_dims(l, -1, s), s), s);
}

} // namespace

std::vector<array> LogSumExp::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>& outputs) {
  Stream s = stream();
  auto p = logsumexp_softmax(primals[0], outputs[0], s);
  return {multiply(expand_dims(cotangents[0], -1, s), p, s)};
}

std::vector<array> LogSumExp::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  Stream s = stream();
  array l(output_shapes(primals)[0], primals[0].dtype(), shared_from_this(),
          primals);
  auto p = logsumexp_softmax(primals[0], l, s);
  return {sum(multiply(tangents[0], p, s), -1, false, s)};
}

std::pair<std::vector<array>, std::vector<int>> LogSumExp::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // Only the last axis goes: the batch axis keeps its place.
  auto [x, ax] = batch_off_last_axis(inputs[0], axes[0], stream());
  Shape shape(x.shape().begin(), x.shape().end() - 1);
  return {{array(shape, x.dtype(), shared_from_this(), {x})}, {ax}};
}

} // namespace kiln
