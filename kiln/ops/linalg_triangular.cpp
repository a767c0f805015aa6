// kiln::linalg: triangular inverses and what is built on them (the inverse
// from a Cholesky factor, triangular solves).
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/linalg.h"

namespace kiln::linalg {

array tri_inv(const array& a, bool upper, StreamOrDevice s) {
  detail::check_matrices("linalg::tri_inv", a, true);
  auto p = detail::placed<TriangularInverse>(to_stream(s), {a}, upper);
  return array(a.shape(), a.dtype(), p, {a});
}

array cholesky_inv(const array& l, bool upper, StreamOrDevice s) {
  detail::check_matrices("linalg::cholesky_inv", l, true);
  // A = L L^T gives A^-1 = L^-T L^-1; A = U^T U gives U^-1 U^-T.
  auto f = tri_inv(l, upper, s);
  auto ft = swapaxes(f, -1, -2, s);
  return upper ? matmul(f, ft, s) : matmul(ft, f, s);
}

array solve_triangular(const array& a, const array& b, bool upper,
                       StreamOrDevice s) {
  const char* op = "linalg::solve_triangular";
  Dtype dt = promote_types(a.dtype(), b.dtype());
  if (dt != float32 && dt != float64) {
    detail::invalid(op, "arrays must have type float32 or float64, got " +
                            detail::describe(a) + " and " +
                            detail::describe(b) + ".");
  }
  detail::check_matrices(op, astype(a, dt, s), true);
  if (b.ndim() == 0) {
    detail::invalid(op, "b must have at least 1 dimension, got " +
                            detail::describe(b) + ".");
  }
  int n = a.shape(-1);
  bool vec = b.ndim() == 1;
  if ((vec ? b.shape(0) : b.shape(-2)) != n) {
    detail::invalid(op, "the last dimension of a (" + detail::describe(a) +
                            ") must match the " + (vec ? "size" : "rows") +
                            " of b (" + detail::describe(b) + ").");
  }
  // The inverse of a triangular matrix is as accurate as the substitution
  // (both are backward stable per column), and matmul broadcasts the batch.
  return matmul(tri_inv(astype(a, dt, s), upper, s), astype(b, dt, s), s);
}

} // namespace kiln::linalg
