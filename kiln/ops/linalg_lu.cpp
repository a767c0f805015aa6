// kiln::linalg: the LU factorization and what is read off it (the
// determinant and its sign and log).
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

namespace detail {

std::vector<array> lu_outputs(const array& a, StreamOrDevice s) {
  auto p = placed<LUF>(to_stream(s), {a});
  auto shapes = p->output_shapes({a});
  return array::make_arrays(shapes, {a.dtype(), uint32, uint32}, p, {a});
}

} // namespace detail

namespace linalg {

namespace {

// The diagonal of each matrix of a square stack.
array diagonal_of(const array& x, StreamOrDevice s) {
  int n = x.shape(-1);
  return sum(multiply(x, eye(n, n, 0, x.dtype(), s), s), -1, false, s);
}

// +1 or -1 per matrix: the parity of the row swaps the pivots record.
array swap_sign(const array& pivots, Dtype dt, StreamOrDevice s) {
  int k = pivots.shape(-1);
  auto swapped = not_equal(pivots, arange(0, k, 1, s), s);
  auto count = sum(astype(swapped, int32, s), -1, false, s);
  auto odd = astype(remainder(count, array(2), s), dt, s);
  return subtract(array(1, dt), multiply(array(2, dt), odd, s), s);
}

// The matrices of a determinant: square, float (integers become float32).
array det_input(const char* op, const array& a, StreamOrDevice s) {
  Dtype dt = detail::at_least_float(a.dtype());
  if (dt != float32 && dt != float64) {
    detail::invalid(op,
                    "arrays must have a real type of at most 64 bits, "
                    "got " +
                        detail::describe(a) + ".");
  }
  auto x = astype(a, dt, s);
  detail::check_matrices(op, x, true);
  return x;
}

} // namespace

std::pair<array, array> lu_factor(const array& a, StreamOrDevice s) {
  detail::check_matrices("linalg::lu_factor", a, false);
  auto outs = detail::lu_outputs(a, s);
  return {outs[0], outs[1]};
}

std::vector<array> lu(const array& a, StreamOrDevice s) {
  detail::check_matrices("linalg::lu", a, false);
  auto outs = detail::lu_outputs(a, s);
  const array& f = outs[0];
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  Shape start(a.ndim(), 0), stop = f.shape();
  stop.back() = k;
  auto l =
      add(tril(slice(f, start, stop, s), -1, s), eye(m, k, 0, a.dtype(), s), s);
  stop = f.shape();
  stop[a.ndim() - 2] = k;
  auto u = triu(slice(f, start, stop, s), 0, s);
  return {outs[2], l, u};
}

array det(const array& a, StreamOrDevice s) {
  auto x = det_input("linalg::det", a, s);
  auto outs = detail::lu_outputs(x, s);
  auto d = prod(diagonal_of(outs[0], s), -1, false, s);
  return multiply(swap_sign(outs[1], x.dtype(), s), d, s);
}

std::pair<array, array> slogdet(const array& a, StreamOrDevice s) {
  auto x = det_input("linalg::slogdet", a, s);
  auto outs = detail::lu_outputs(x, s);
  auto d = diagonal_of(outs[0], s);
  // A zero on the diagonal gives sign 0 and log|det| -inf.
  auto sgn = multiply(swap_sign(outs[1], x.dtype(), s),
                      prod(sign(d, s), -1, false, s), s);
  return {sgn, sum(log(abs(d, s), s), -1, false, s)};
}

} // namespace linalg

} // namespace kiln
