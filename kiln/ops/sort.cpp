#include "kiln/ops/sort.h"

#include "kiln/ops/complex_order.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/sort.h"

namespace kiln {

using detail::describe;
using detail::invalid;

namespace {

int check_axis(const char* op, const array& a, int axis) {
  return detail::normalize_axis(axis, static_cast<int>(a.ndim()), op);
}

// The bits of float32 x as a uint32 that orders as x does (-0 as +0).
array ordered_bits(const array& x, StreamOrDevice s) {
  array u = view(add(x, array(0.0f), s), uint32, s); // -0 + 0 is +0
  array sign(0x80000000u, uint32);
  return where(greater_equal(u, sign, s), bitwise_invert(u, s),
               bitwise_or(u, sign, s), s);
}

// The stable order of complex values along axis, as MLX orders them: one
// stable sort of their keys.
array complex_argsort(const array& a, int axis, StreamOrDevice s) {
  return argsort(detail::complex_order_keys(a, s), axis, s);
}

int check_kth(const char* op, const array& a, int kth, int axis) {
  int n = a.shape(axis);
  if (kth < -n || kth >= n) {
    invalid(op, "kth " + std::to_string(kth) + " is out of range for axis " +
                    std::to_string(axis) + " of the " + describe(a) + ".");
  }
  return kth;
}

} // namespace

namespace detail {

array complex_order_keys(const array& z, StreamOrDevice s) {
  array re = real(z, s), im = imag(z, s);
  array key = bitwise_or(
      left_shift(astype(ordered_bits(re, s), uint64, s), array(32, uint64), s),
      astype(ordered_bits(im, s), uint64, s), s);
  array nan = logical_or(isnan(re, s), isnan(im, s), s);
  return where(nan, array(UINT64_MAX, uint64), key, s);
}

} // namespace detail

array sort(const array& a, int axis, StreamOrDevice s) {
  axis = check_axis("sort", a, axis);
  if (is_complex(a.dtype())) {
    return take_along_axis(a, complex_argsort(a, axis, s), axis, s);
  }
  auto p = std::make_shared<Sort>(to_stream(s), axis);
  return array(a.shape(), a.dtype(), std::move(p), {a});
}

array sort(const array& a, StreamOrDevice s) {
  return sort(flatten(a, 0, -1, s), 0, s);
}

array argsort(const array& a, int axis, StreamOrDevice s) {
  axis = check_axis("argsort", a, axis);
  if (is_complex(a.dtype())) return complex_argsort(a, axis, s);
  auto p = std::make_shared<ArgSort>(to_stream(s), axis);
  return array(a.shape(), uint32, std::move(p), {a});
}

array argsort(const array& a, StreamOrDevice s) {
  return argsort(flatten(a, 0, -1, s), 0, s);
}

array partition(const array& a, int kth, int axis, StreamOrDevice s) {
  axis = check_axis("partition", a, axis);
  kth = check_kth("partition", a, kth, axis);
  // A full sort partitions (complex values have no partition kernel).
  if (is_complex(a.dtype())) return sort(a, axis, s);
  auto p = std::make_shared<Partition>(to_stream(s), axis, kth);
  return array(a.shape(), a.dtype(), std::move(p), {a});
}

array partition(const array& a, int kth, StreamOrDevice s) {
  return partition(flatten(a, 0, -1, s), kth, 0, s);
}

array argpartition(const array& a, int kth, int axis, StreamOrDevice s) {
  axis = check_axis("argpartition", a, axis);
  kth = check_kth("argpartition", a, kth, axis);
  if (is_complex(a.dtype())) return complex_argsort(a, axis, s);
  auto p = std::make_shared<ArgPartition>(to_stream(s), axis, kth);
  return array(a.shape(), uint32, std::move(p), {a});
}

array argpartition(const array& a, int kth, StreamOrDevice s) {
  return argpartition(flatten(a, 0, -1, s), kth, 0, s);
}

array topk(const array& a, int k, int axis, StreamOrDevice s) {
  axis = check_axis("topk", a, axis);
  int n = a.shape(axis);
  if (k < 0 || k > n) {
    invalid("topk", "k = " + std::to_string(k) + " is out of range for axis " +
                        std::to_string(axis) + " of the " + describe(a) + ".");
  }
  // Counted from the end, so a shapeless compile keeps the top k of a new
  // size.
  Shape start(a.ndim(), 0), stop(a.ndim(), slice_end);
  start[axis] = -k;
  if (k == 0) {
    stop[axis] = 0;
    return slice(a, start, stop, s);
  }
  return slice(partition(a, -k, axis, s), start, stop, s);
}

array topk(const array& a, int k, StreamOrDevice s) {
  return topk(flatten(a, 0, -1, s), k, 0, s);
}

} // namespace kiln
