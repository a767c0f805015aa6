// Ops that move elements along axes, built from slices and joins (declared
// in slicing.h): flip, roll, unstack and diff.
#include <algorithm>
#include <numeric>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"

namespace kiln {

using detail::describe;
using detail::invalid;

array flip(const array& a, const std::vector<int>& axes_in, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  auto axes = detail::normalize_axes(axes_in, nd, "flip");
  if (axes.empty()) return a;
  Shape start(nd, 0), stop = a.shape(), strides(nd, 1);
  for (int ax : axes) {
    // A reversed slice over the whole axis: from the last element to
    // before the first.
    start[ax] = -1;
    stop[ax] = -a.shape(ax) - 1;
    strides[ax] = -1;
  }
  return slice(a, start, stop, strides, s);
}

array flip(const array& a, int axis, StreamOrDevice s) {
  return flip(a, std::vector<int>{axis}, s);
}

array flip(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return flip(a, axes, s);
}

array roll(const array& a, const Shape& shift, const std::vector<int>& axes,
           StreamOrDevice s) {
  // Shifts and axes broadcast against each other, and shifts of one axis
  // add up (NumPy's rule).
  size_t count = std::max(shift.size(), axes.size());
  if ((shift.size() != count && shift.size() != 1) ||
      (axes.size() != count && axes.size() != 1)) {
    invalid("roll", std::to_string(shift.size()) + " shifts for " +
                        std::to_string(axes.size()) + " axes.");
  }
  int nd = static_cast<int>(a.ndim());
  std::vector<int64_t> total(nd, 0);
  for (size_t i = 0; i < count; ++i) {
    int ax = detail::normalize_axis(axes[axes.size() == 1 ? 0 : i], nd, "roll");
    total[ax] += shift[shift.size() == 1 ? 0 : i];
  }
  array out = a;
  for (int ax = 0; ax < nd; ++ax) {
    int n = a.shape(ax);
    if (n == 0 || total[ax] == 0) continue;
    int k = static_cast<int>(((total[ax] % n) + n) % n);
    if (k == 0) continue;
    // The last k elements move to the front.
    Shape start(nd, 0), stop = out.shape();
    start[ax] = n - k;
    auto tail = slice(out, start, stop, s);
    start[ax] = 0;
    stop[ax] = n - k;
    auto head = slice(out, start, stop, s);
    out = concatenate({tail, head}, ax, s);
  }
  return out;
}

array roll(const array& a, int shift, const std::vector<int>& axes,
           StreamOrDevice s) {
  return roll(a, Shape(axes.size(), shift), axes, s);
}

array roll(const array& a, int shift, int axis, StreamOrDevice s) {
  return roll(a, Shape{shift}, {axis}, s);
}

array roll(const array& a, int shift, StreamOrDevice s) {
  return reshape(roll(flatten(a, 0, -1, s), shift, 0, s), a.shape(), s);
}

std::vector<array> unstack(const array& a, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) invalid("unstack", "cannot unstack a 0-d array.");
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), "unstack");
  std::vector<array> out;
  int n = a.shape(axis);
  if (n == 0) return out;
  for (auto& piece : split(a, n, axis, s)) {
    out.push_back(squeeze(piece, axis, s));
  }
  return out;
}

array diff(const array& a, int n, int axis, StreamOrDevice s) {
  if (n < 0) {
    invalid("diff",
            "the order n must be non-negative, got " + std::to_string(n) + ".");
  }
  if (a.ndim() == 0)
    invalid("diff", "needs at least 1-d input, got a 0-d " + describe(a) + ".");
  int nd = static_cast<int>(a.ndim());
  axis = detail::normalize_axis(axis, nd, "diff");
  array out = a;
  for (int i = 0; i < n && out.shape(axis) > 0; ++i) {
    Shape start(nd, 0), stop = out.shape();
    start[axis] = 1;
    auto later = slice(out, start, stop, s);
    start[axis] = 0;
    stop[axis] = out.shape(axis) - 1;
    auto earlier = slice(out, start, stop, s);
    out = out.dtype() == bool_ ? not_equal(later, earlier, s)
                               : subtract(later, earlier, s);
  }
  return out;
}

} // namespace kiln
