// kiln::linalg ops composed from others, so their gradients and vmap come
// from the parts: the pseudo-inverse (from the SVD) and the cross product
// (from slices).
#include <algorithm>
#include <limits>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"

namespace kiln::linalg {

namespace {

// Entries [lo, hi) of x along axis.
array part(const array& x, int axis, int lo, int hi, StreamOrDevice s) {
  Shape start(x.ndim(), 0), stop = x.shape();
  start[axis] = lo;
  stop[axis] = hi;
  return slice(x, start, stop, s);
}

} // namespace

array pinv(const array& a, StreamOrDevice s) {
  detail::check_matrices("linalg::pinv", a, false);
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  int nd = static_cast<int>(a.ndim());
  if (k == 0) {
    // No singular values: the pseudo-inverse of an empty map is zero.
    Shape out = a.shape();
    std::swap(out[nd - 1], out[nd - 2]);
    return zeros(out, a.dtype(), s);
  }
  auto f = svd(a, true, s);
  auto u = part(f[0], nd - 1, 0, k, s);
  auto vt = part(f[2], nd - 2, 0, k, s);
  const array& sv = f[1];
  double eps = a.dtype() == float32 ? std::numeric_limits<float>::epsilon()
                                    : std::numeric_limits<double>::epsilon();
  // Singular values at or below the cutoff count as zero; the inner where
  // keeps 1/s finite there so that gradients stay finite too.
  auto cutoff =
      multiply(max(sv, -1, true, s), array(std::max(m, n) * eps, a.dtype()), s);
  auto keep = greater(sv, cutoff, s);
  auto one = array(1, a.dtype());
  auto inv_s = where(keep, divide(one, where(keep, sv, one, s), s),
                     array(0, a.dtype()), s);
  auto vs = multiply(swapaxes(vt, -1, -2, s), expand_dims(inv_s, -2, s), s);
  return matmul(vs, swapaxes(u, -1, -2, s), s);
}

array cross(const array& a, const array& b, int axis, StreamOrDevice s) {
  const char* op = "linalg::cross";
  int ax_a = detail::normalize_axis(axis, static_cast<int>(a.ndim()), op);
  int ax_b = detail::normalize_axis(axis, static_cast<int>(b.ndim()), op);
  for (const array* x : {&a, &b}) {
    int d = x->shape(x == &a ? ax_a : ax_b);
    if (d != 2 && d != 3) {
      detail::invalid(op, "the axis " + std::to_string(axis) +
                              " must have size 2 or 3, got " +
                              detail::describe(a) + " and " +
                              detail::describe(b) + ".");
    }
  }
  Dtype dt = promote_types(a.dtype(), b.dtype());
  // Work with the vector axis last; a 2-vector gains a zero z component.
  auto last = [&](const array& x, int ax) {
    auto y = moveaxis(astype(x, dt, s), ax, -1, s);
    if (y.shape(-1) == 3) return y;
    Shape zshape = y.shape();
    zshape.back() = 1;
    return concatenate({y, zeros(zshape, dt, s)}, -1, s);
  };
  auto x = last(a, ax_a), y = last(b, ax_b);
  int lx = static_cast<int>(x.ndim()) - 1, ly = static_cast<int>(y.ndim()) - 1;
  auto c = [&](const array& v, int l, int i) {
    return part(v, l, i, i + 1, s);
  };
  auto comp = [&](int i, int j) {
    return subtract(multiply(c(x, lx, i), c(y, ly, j), s),
                    multiply(c(x, lx, j), c(y, ly, i), s), s);
  };
  auto out = concatenate({comp(1, 2), comp(2, 0), comp(0, 1)}, -1, s);
  int out_axis = detail::normalize_axis(axis, static_cast<int>(out.ndim()), op);
  return moveaxis(out, -1, out_axis, s);
}

} // namespace kiln::linalg
