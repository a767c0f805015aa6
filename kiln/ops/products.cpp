// Products built from broadcasting (declared in linalg.h): kron and vecdot.
#include <algorithm>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"

namespace kiln {

array kron(const array& a, const array& b, StreamOrDevice s) {
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
    out.push_back(da * db);
  }
  auto prod = multiply(reshape(a, ea, s), reshape(b, eb, s), s);
  return reshape(prod, out, s);
}

array vecdot(const array& a, const array& b, int axis, StreamOrDevice s) {
  auto shape = detail::broadcast_shapes(a.shape(), b.shape(), "vecdot");
  axis = detail::normalize_axis(axis, static_cast<int>(shape.size()), "vecdot");
  return sum(multiply(conjugate(a, s), b, s), axis, false, s);
}

} // namespace kiln
