// Diagonals: diagonal and diag (declared in slicing.h) and trace (declared
// in reduction.h). A diagonal of an (n, m) matrix is a strided slice of its
// flattened n * m elements, so transforms follow from slice and reshape.
#include <algorithm>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"

namespace kiln {

using detail::describe;
using detail::invalid;

array diagonal(const array& a, int offset, int axis1, int axis2,
               StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (nd < 2) {
    invalid("diagonal", "needs an array of at least 2 dimensions, got a " +
                            describe(a) + ".");
  }
  axis1 = detail::normalize_axis(axis1, nd, "diagonal");
  axis2 = detail::normalize_axis(axis2, nd, "diagonal");
  if (axis1 == axis2) {
    invalid("diagonal", "axis1 and axis2 must differ, both are " +
                            std::to_string(axis1) + ".");
  }
  // The two axes go last, in the order (axis1, axis2).
  std::vector<int> perm;
  for (int i = 0; i < nd; ++i) {
    if (i != axis1 && i != axis2) perm.push_back(i);
  }
  perm.push_back(axis1);
  perm.push_back(axis2);
  auto x = transpose(a, perm, s);
  int64_t n = a.shape(axis1), m = a.shape(axis2);
  int64_t len = offset >= 0 ? std::min(n, m - offset) : std::min(n + offset, m);
  len = std::max<int64_t>(len, 0);
  Shape lead(x.shape().begin(), x.shape().end() - 2);
  Shape flat_shape = lead;
  flat_shape.push_back(static_cast<int>(n * m));
  auto flat = reshape(x, flat_shape, s);
  // Element i sits at (i, i + offset) or (i - offset, i): flat index
  // first + i * (m + 1).
  int64_t first = offset >= 0 ? offset : -int64_t(offset) * m;
  Shape start(lead.size() + 1, 0), stop = flat_shape, step(lead.size() + 1, 1);
  start.back() = static_cast<int>(len > 0 ? first : 0);
  stop.back() = static_cast<int>(len > 0 ? first + (len - 1) * (m + 1) + 1 : 0);
  step.back() = static_cast<int>(m + 1);
  return slice(flat, start, stop, step, s);
}

array diag(const array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 2) return diagonal(a, k, 0, 1, s);
  if (a.ndim() != 1) {
    invalid("diag", "needs a 1-d or 2-d array, got a " + describe(a) + ".");
  }
  int len = a.shape(0);
  int n = len + std::abs(k);
  // Row r, column r + k holds a[r] (k >= 0); row c - k, column c holds a[c]
  // (k < 0). Padded to n, a broadcasts along the other axis.
  auto padded =
      pad(a, {0}, {0}, {std::abs(k)}, array(0, a.dtype()), "constant", s);
  auto values = k >= 0 ? expand_dims(padded, 1, s) : expand_dims(padded, 0, s);
  auto mask = eye(n, n, k, bool_, s);
  return where(mask, values, zeros({}, a.dtype(), s), s);
}

array trace(const array& a, int offset, int axis1, int axis2,
            std::optional<Dtype> dtype, StreamOrDevice s) {
  if (a.ndim() < 2) {
    invalid("trace", "needs an array of at least 2 dimensions, got a " +
                         describe(a) + ".");
  }
  auto d = diagonal(a, offset, axis1, axis2, s);
  if (dtype) d = astype(d, *dtype, s);
  auto out = sum(d, -1, false, s);
  return dtype ? astype(out, *dtype, s) : out;
}

} // namespace kiln
