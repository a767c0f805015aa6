// Reductions built from other ops (declared in reduction.h): median (by
// sorting), minmax and count_nonzero.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/utils.h"

namespace kiln {

using detail::describe;
using detail::invalid;

namespace {
std::vector<int> every_axis(const array& a) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}
} // namespace

array median(const array& a, const std::vector<int>& axes_in, bool keepdims,
             StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  auto axes = detail::normalize_axes(axes_in, nd, "median");
  Dtype dt = detail::at_least_float(a.dtype());
  // The reduced axes go last and become one, which is sorted.
  std::vector<int> perm;
  Shape kept, kept_dims = a.shape();
  int64_t count = 1;
  for (int i = 0; i < nd; ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      perm.push_back(i);
      kept.push_back(a.shape(i));
    } else {
      count *= a.shape(i);
      kept_dims[i] = 1;
    }
  }
  if (count == 0) {
    invalid("median", "cannot take the median over zero elements of a " +
                          describe(a) + ".");
  }
  perm.insert(perm.end(), axes.begin(), axes.end());
  Shape flat_shape = kept;
  flat_shape.push_back(static_cast<int>(count));
  auto x = reshape(transpose(astype(a, dt, s), perm, s), flat_shape, s);
  auto sorted = sort(x, -1, s);
  int lo = static_cast<int>((count - 1) / 2), hi = static_cast<int>(count / 2);
  auto mid =
      lo == hi
          ? take(sorted, lo, -1, s)
          : multiply(add(take(sorted, lo, -1, s), take(sorted, hi, -1, s), s),
                     array(0.5, dt), s);
  // Sorting puts NaN last; the median of values with a NaN is NaN.
  auto has_nan = any(isnan(x, s), -1, false, s);
  auto out = where(has_nan, array(std::nan(""), dt), mid, s);
  return keepdims ? reshape(out, kept_dims, s) : out;
}

array median(const array& a, bool keepdims, StreamOrDevice s) {
  return median(a, every_axis(a), keepdims, s);
}

array median(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return median(a, std::vector<int>{axis}, keepdims, s);
}

std::pair<array, array> minmax(const array& a, const std::vector<int>& axes,
                               bool keepdims, StreamOrDevice s) {
  return {min(a, axes, keepdims, s), max(a, axes, keepdims, s)};
}

std::pair<array, array> minmax(const array& a, bool keepdims,
                               StreamOrDevice s) {
  return minmax(a, every_axis(a), keepdims, s);
}

array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims,
                    StreamOrDevice s) {
  auto nonzero = not_equal(a, zeros({}, a.dtype(), s), s);
  return astype(sum(nonzero, axes, keepdims, s), int32, s);
}

array count_nonzero(const array& a, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, every_axis(a), keepdims, s);
}

} // namespace kiln
