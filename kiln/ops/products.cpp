// Products built from broadcasting (declared in linalg.h): kron and vecdot.
#include <algorithm>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"

namespace kiln {

array kron(const array& a, const array& b, StreamOrDevice s) {
  if (a.size() == 0 || b.size() == 0) {
    detail::invalid("kron", "inputs cannot be empty; got a " +
                                detail::describe(a) + " and a " +
                                detail::describe(b) + ".");
  }
  size_t nd = std::max(a.ndim(), b.ndim());
  if (nd == 0) return multiply(a, b, s);
  // Padded shapes interleaved: a as (a0, 1, a1, 1, ...), b as
  // (1, b0, 1, b1, ...); their product merges pairwise into a_i * b_i.
  Shape ea, eb, out;
  for (size_t i = 0; i < nd; ++i) {
    int da = i < nd - a.ndim() ? 1 : a.shape(i - (nd - a.ndim()));
    int db = i < nd - b.ndim() ? 1 : b.shape(i - (nd - b.ndim()));
    ea.insert(ea.end(), {da, 1});
    eb.insert(eb.end(), {1, db});
    out.push_back(
        detail::checked_dim(static_cast<int64_t>(da) * db, "kron"));
  }
  auto prod = multiply(reshape(a, ea, s), reshape(b, eb, s), s);
  return reshape(prod, out, s);
}

array vecdot(const array& a, const array& b, int axis, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    detail::invalid("vecdot", "inputs must be at least 1-d; got a " +
                                  detail::describe(a) + " and a " +
                                  detail::describe(b) + ".");
  }
  // The reduced axis is the same one counted from the end (a negative
  // axis) or from the front in both, and has one length: it does not
  // broadcast (NumPy's (n),(n)->() signature).
  int na = static_cast<int>(a.ndim()), nb = static_cast<int>(b.ndim());
  int ax = detail::normalize_axis(axis, na, "vecdot");
  int bx = detail::normalize_axis(axis, nb, "vecdot");
  if (ax - na != bx - nb) {
    detail::invalid("vecdot", "axis " + std::to_string(axis) +
                                  " is not the same axis of a (" +
                                  detail::describe(a) + ") and b (" +
                                  detail::describe(b) + ").");
  }
  if (a.shape(ax) != b.shape(bx)) {
    detail::invalid("vecdot", "a (" + detail::describe(a) + ") and b (" +
                                  detail::describe(b) +
                                  ") differ in length along axis " +
                                  std::to_string(axis) + ".");
  }
  auto shape = detail::broadcast_shapes(a.shape(), b.shape(), "vecdot");
  int out_axis = ax - na + static_cast<int>(shape.size());
  return sum(multiply(conjugate(a, s), b, s), out_axis, false, s);
}

} // namespace kiln
