// kiln::linalg: norms (composed from elementwise ops, reductions and SVD)
// and the LAPACK-backed factorizations.
#include "kiln/ops/linalg.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/linalg.h"

namespace kiln::linalg {

using detail::describe;
using detail::invalid;

namespace {

constexpr const char* norm_op = "linalg::norm";

// Values whose norm is taken: complex becomes its magnitude (abs keeps the
// complex dtype, so cast), integers float.
array norm_input(const array& a, StreamOrDevice s) {
  if (is_complex(a.dtype())) return astype(abs(a, s), float32, s);
  return astype(a, detail::at_least_float(a.dtype()), s);
}

// The axes a norm runs over: given ones (1 or 2, order kept), else all axes
// of a 1-d or 2-d array.
std::vector<int> norm_axes(const array& a,
                           const std::optional<std::vector<int>>& axis) {
  int nd = static_cast<int>(a.ndim());
  std::vector<int> ax;
  if (axis && !axis->empty()) {
    if (axis->size() > 2) {
      invalid(norm_op, "received " + std::to_string(axis->size()) +
                           " axes; a norm takes 1 (vector) or 2 (matrix).");
    }
    for (int x : *axis) ax.push_back(detail::normalize_axis(x, nd, norm_op));
    if (ax.size() == 2 && ax[0] == ax[1]) {
      invalid(norm_op, "the two matrix axes must differ.");
    }
  } else {
    if (nd != 1 && nd != 2) {
      invalid(norm_op,
              "with ord and no axis, the input must be 1-d or 2-d, "
              "got " +
                  describe(a) + ".");
    }
    ax.resize(nd);
    std::iota(ax.begin(), ax.end(), 0);
  }
  return ax;
}

array squeeze_axes(const array& x, std::vector<int> axes, bool keepdims,
                   StreamOrDevice s) {
  return keepdims ? x : squeeze(x, axes, s);
}

array vector_norm(const array& x, double ord, int axis, bool keepdims,
                  StreamOrDevice s) {
  if (std::isinf(ord)) {
    return ord > 0 ? max(abs(x, s), axis, keepdims, s)
                   : min(abs(x, s), axis, keepdims, s);
  }
  if (ord == 0) {
    auto nz = not_equal(x, array(0, x.dtype()), s);
    return astype(sum(nz, axis, keepdims, s), x.dtype(), s);
  }
  if (ord == 1) return sum(abs(x, s), axis, keepdims, s);
  if (ord == 2) return sqrt(sum(square(x, s), axis, keepdims, s), s);
  auto p = power(abs(x, s), array(ord, x.dtype()), s);
  return power(sum(p, axis, keepdims, s), array(1.0 / ord, x.dtype()), s);
}

// Singular values reduced by `reduce` over the matrix axes (r, c).
array singular_norm(const array& x, int r, int c, bool keepdims,
                    array (*reduce)(const array&, int, bool, StreamOrDevice),
                    StreamOrDevice s) {
  std::vector<int> perm;
  for (int i = 0; i < static_cast<int>(x.ndim()); ++i) {
    if (i != r && i != c) perm.push_back(i);
  }
  perm.push_back(r);
  perm.push_back(c);
  auto sv = svd(transpose(x, perm, s), false, s)[0];
  auto out = reduce(sv, -1, false, s);
  if (!keepdims) return out;
  return expand_dims(out, {std::min(r, c), std::max(r, c)}, s);
}

array matrix_norm(const array& x, double ord, int r, int c, bool keepdims,
                  StreamOrDevice s) {
  if (ord == 2) {
    return singular_norm(
        x, r, c, keepdims,
        [](const array& v, int ax, bool k, StreamOrDevice st) {
          return max(v, ax, k, st);
        },
        s);
  }
  if (ord == -2) {
    return singular_norm(
        x, r, c, keepdims,
        [](const array& v, int ax, bool k, StreamOrDevice st) {
          return min(v, ax, k, st);
        },
        s);
  }
  // 1 / -1: extreme column sum; inf / -inf: extreme row sum.
  bool rows = std::isinf(ord);
  if (!rows && std::abs(ord) != 1) {
    invalid(norm_op, "invalid ord " + std::to_string(ord) +
                         " for a matrix norm (use 1, -1, 2, -2, inf, -inf, "
                         "'fro' or 'nuc').");
  }
  auto sums = sum(abs(x, s), rows ? c : r, true, s);
  int other = rows ? r : c;
  auto out = ord > 0 ? max(sums, other, true, s) : min(sums, other, true, s);
  return squeeze_axes(out, {r, c}, keepdims, s);
}

} // namespace

array norm(const array& a, double ord,
           const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  auto ax = norm_axes(a, axis);
  auto x = norm_input(a, s);
  if (ax.size() == 1) return vector_norm(x, ord, ax[0], keepdims, s);
  return matrix_norm(x, ord, ax[0], ax[1], keepdims, s);
}

array norm(const array& a, double ord, int axis, bool keepdims,
           StreamOrDevice s) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}

array norm(const array& a, const std::string& ord,
           const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  auto ax = norm_axes(a, axis);
  if (ax.size() != 2) {
    invalid(norm_op, "norm '" + ord +
                         "' is only defined for matrices, but received " +
                         std::to_string(ax.size()) + " axis.");
  }
  auto x = norm_input(a, s);
  if (ord == "fro") {
    return sqrt(sum(square(x, s), ax, keepdims, s), s);
  }
  if (ord == "nuc") {
    return singular_norm(
        x, ax[0], ax[1], keepdims,
        [](const array& v, int i, bool k, StreamOrDevice st) {
          return sum(v, i, k, st);
        },
        s);
  }
  invalid(norm_op, "invalid ord '" + ord + "' for a matrix norm.");
}

array norm(const array& a, const std::string& ord, int axis, bool keepdims,
           StreamOrDevice s) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}

array norm(const array& a, const std::optional<std::vector<int>>& axis,
           bool keepdims, StreamOrDevice s) {
  auto x = norm_input(a, s);
  std::vector<int> ax;
  if (axis && !axis->empty()) {
    if (axis->size() > 2) {
      invalid(norm_op, "received " + std::to_string(axis->size()) +
                           " axes; a norm takes 1 (vector) or 2 (matrix).");
    }
    ax = norm_axes(a, axis);
  } else {
    // No axis: the 2-norm of the flattened array.
    ax.resize(a.ndim());
    std::iota(ax.begin(), ax.end(), 0);
  }
  return sqrt(sum(square(x, s), ax, keepdims, s), s);
}

array norm(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return norm(a, std::vector<int>{axis}, keepdims, s);
}

array inv(const array& a, StreamOrDevice s) {
  detail::check_matrices("linalg::inv", a, true);
  return array(a.shape(), a.dtype(),
               detail::placed<Inverse>(to_stream(s), {a}), {a});
}

array cholesky(const array& a, bool upper, StreamOrDevice s) {
  detail::check_matrices("linalg::cholesky", a, true);
  auto p = detail::placed<Cholesky>(to_stream(s), {a}, upper);
  return array(a.shape(), a.dtype(), p, {a});
}

std::pair<array, array> qr(const array& a, StreamOrDevice s) {
  detail::check_matrices("linalg::qr", a, false);
  auto p = detail::placed<QRF>(to_stream(s), {a});
  auto shapes = p->output_shapes({a});
  auto outs = array::make_arrays(shapes, {a.dtype(), a.dtype()}, p, {a});
  return {outs[0], outs[1]};
}

std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s) {
  detail::check_matrices("linalg::svd", a, false, true);
  auto p = detail::placed<SVD>(to_stream(s), {a}, compute_uv);
  auto shapes = p->output_shapes({a});
  std::vector<Dtype> dtypes(shapes.size(), a.dtype());
  // Singular values are real: float32 for complex64.
  if (a.dtype() == complex64) dtypes[compute_uv ? 1 : 0] = float32;
  return array::make_arrays(shapes, dtypes, p, {a});
}

std::vector<array> svd(const array& a, StreamOrDevice s) {
  return svd(a, true, s);
}

array solve(const array& a, const array& b, StreamOrDevice s) {
  const char* op = "linalg::solve";
  Dtype dt = promote_types(a.dtype(), b.dtype());
  if (dt != float32 && dt != float64) {
    invalid(op, "arrays must have type float32 or float64, got " + describe(a) +
                    " and " + describe(b) + ".");
  }
  detail::check_matrices(op, astype(a, dt, s), true);
  if (b.ndim() == 0) {
    invalid(op, "b must have at least 1 dimension, got " + describe(b) + ".");
  }
  int n = a.shape(-1);
  bool vec = b.ndim() == 1;
  if ((vec ? b.shape(0) : b.shape(-2)) != n) {
    invalid(op, "the last dimension of a (" + describe(a) +
                    ") must match the " + (vec ? "size" : "rows") + " of b (" +
                    describe(b) + ").");
  }
  array bm = vec ? expand_dims(b, -1, s) : b;
  Shape ab(a.shape().begin(), a.shape().end() - 2);
  Shape bb(bm.shape().begin(), bm.shape().end() - 2);
  Shape batch = detail::broadcast_shapes(ab, bb, op);
  Shape a_shape = batch, b_shape = batch;
  a_shape.insert(a_shape.end(), {n, n});
  b_shape.insert(b_shape.end(), {n, bm.shape(-1)});
  auto a2 = broadcast_to(astype(a, dt, s), a_shape, s);
  auto b2 = broadcast_to(astype(bm, dt, s), b_shape, s);
  array x(b_shape, dt, detail::placed<Solve>(to_stream(s), {a2, b2}),
          {a2, b2});
  return vec ? squeeze(x, -1, s) : x;
}

} // namespace kiln::linalg

namespace kiln::detail {

void check_matrices(const char* op, const array& a, bool square,
                    bool complex_ok) {
  if (a.dtype() != float32 && a.dtype() != float64 &&
      !(complex_ok && a.dtype() == complex64)) {
    invalid(op, std::string("arrays must have type float32 or float64") +
                    (complex_ok ? " or complex64" : "") + ", got " +
                    describe(a) + ".");
  }
  if (a.ndim() < 2) {
    invalid(op,
            "arrays must have at least 2 dimensions, got " + describe(a) + ".");
  }
  if (square && a.shape(-1) != a.shape(-2)) {
    invalid(op, "expects square matrices, got " + describe(a) + ".");
  }
}

} // namespace kiln::detail
