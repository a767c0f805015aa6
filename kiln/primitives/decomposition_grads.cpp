// Transformation rules of the triangular inverse, the LU factorization and
// the eigendecompositions. As in factorization_grads.cpp, each derivative
// has a forward (jvp) and an adjoint (vjp) form that the tests check
// against each other and against finite differences.
#include <algorithm>
#include <optional>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

using detail::batch_first;

namespace {

array mT(const array& x, StreamOrDevice s) { return swapaxes(x, -1, -2, s); }

array eye_of(int n, Dtype dt, StreamOrDevice s) { return eye(n, n, 0, dt, s); }

// The triangle a triangular op reads (diagonal included).
array triangle(const array& x, bool upper, StreamOrDevice s) {
  return upper ? triu(x, 0, s) : tril(x, 0, s);
}

// G's pairing with a symmetric matrix built from one triangle of A: an
// off-diagonal entry of the triangle stands for itself and its mirror.
array fold_to_triangle(const array& g, bool upper, StreamOrDevice s) {
  int n = g.shape(-1);
  auto both = add(g, mT(g, s), s);
  auto off = upper ? triu(both, 1, s) : tril(both, -1, s);
  return add(off, multiply(g, eye_of(n, g.dtype(), s), s), s);
}

// The symmetric matrix one triangle of A stands for.
array mirror_triangle(const array& a, bool upper, StreamOrDevice s) {
  int n = a.shape(-1);
  auto off = upper ? triu(a, 1, s) : tril(a, -1, s);
  return add(add(off, mT(off, s), s), multiply(a, eye_of(n, a.dtype(), s), s),
             s);
}

} // namespace

// ---- TriangularInverse: X = T^-1 with T the triangle read ----
std::vector<array> TriangularInverse::vjp(const std::vector<array>&,
                                          const std::vector<array>& cotangents,
                                          const std::vector<int>&,
                                          const std::vector<array>& outputs) {
  StreamOrDevice s = stream();
  auto xt = mT(outputs[0], s);
  auto g = matmul(xt, matmul(cotangents[0], xt, s), s);
  return {negative(triangle(g, upper_, s), s)};
}

std::vector<array> TriangularInverse::jvp(const std::vector<array>& primals,
                                          const std::vector<array>& tangents,
                                          const std::vector<int>&) {
  StreamOrDevice s = stream();
  auto x = linalg::tri_inv(primals[0], upper_, s);
  auto dt = triangle(tangents[0], upper_, s);
  return {negative(matmul(x, matmul(dt, x, s), s), s)};
}

std::pair<std::vector<array>, std::vector<int>> TriangularInverse::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  return {{linalg::tri_inv(batch_first(inputs[0], axes[0], s), upper_, s)},
          {0}};
}

// ---- LUF ----
// With B = P a = L U (P the row order the pivots picked, held fixed), the
// square part B1 = L1 U1 (K x K) has F = L1^-1 dB1 U1^-1,
// dL1 = L1 tril(F, -1) and dU1 = triu(F) U1. A tall matrix adds rows
// B2 = L2 U1, so dL2 = (dB2 - L2 dU1) U1^-1; a wide one adds columns
// B2 = L1 U2, so dU2 = L1^-1 (dB2 - dL1 U2).
namespace {

// P with (P a)[r] = a[order[r]], from perm (a[i] = (L U)[perm[i]]):
// P[r, c] = 1 where perm[c] == r.
array row_permutation(const array& perm, Dtype dt, StreamOrDevice s) {
  int n = perm.shape(-1);
  auto rows = reshape(arange(0, n, 1, s), {n, 1}, s);
  return astype(equal(expand_dims(perm, -2, s), rows, s), dt, s);
}

// Rows [r0, r1) and columns [c0, c1) of a stack of matrices.
array block(const array& x, int r0, int r1, int c0, int c1, StreamOrDevice s) {
  int nd = static_cast<int>(x.ndim());
  Shape start(nd, 0), stop = x.shape();
  start[nd - 2] = r0;
  stop[nd - 2] = r1;
  start[nd - 1] = c0;
  stop[nd - 1] = c1;
  return slice(x, start, stop, s);
}

// The packed factors split as above: the unit lower L1 and upper U1 of the
// square part, their inverses, and the extra block (L2 or U2) if any.
struct LuParts {
  array l1, u1, l1_inv, u1_inv;
  std::optional<array> extra;
};

LuParts lu_parts(const array& lu, StreamOrDevice s) {
  int m = lu.shape(-2), n = lu.shape(-1), k = std::min(m, n);
  auto sq = block(lu, 0, k, 0, k, s);
  auto l1 = add(tril(sq, -1, s), eye_of(k, lu.dtype(), s), s);
  auto u1 = triu(sq, 0, s);
  LuParts p{l1, u1, linalg::tri_inv(l1, false, s), linalg::tri_inv(u1, true, s),
            std::nullopt};
  if (m > k) p.extra = block(lu, k, m, 0, n, s);
  if (n > k) p.extra = block(lu, 0, m, k, n, s);
  return p;
}

} // namespace

std::vector<array> LUF::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  StreamOrDevice s = stream();
  const array& a = primals[0];
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto p = lu_parts(outputs[0], s);
  const array& bar = cotangents[0];
  auto bar1 = block(bar, 0, k, 0, k, s);
  // Cotangents of L1 and U1 (any matrices: only their pairing with
  // L1 tril(F, -1) and triu(F) U1 matters), and of the extra block of B.
  array lbar = tril(bar1, -1, s), ubar = triu(bar1, 0, s);
  std::optional<array> extra_bar;
  if (m > k) {
    auto b2 = matmul(block(bar, k, m, 0, n, s), mT(p.u1_inv, s), s);
    ubar = subtract(ubar, matmul(mT(*p.extra, s), b2, s), s);
    extra_bar = b2;
  } else if (n > k) {
    auto b2 = matmul(mT(p.l1_inv, s), block(bar, 0, m, k, n, s), s);
    lbar = subtract(lbar, matmul(b2, mT(*p.extra, s), s), s);
    extra_bar = b2;
  }
  auto g = add(tril(matmul(mT(p.l1, s), lbar, s), -1, s),
               triu(matmul(ubar, mT(p.u1, s), s), 0, s), s);
  auto bbar = matmul(mT(p.l1_inv, s), matmul(g, mT(p.u1_inv, s), s), s);
  if (extra_bar) bbar = concatenate({bbar, *extra_bar}, m > k ? -2 : -1, s);
  auto perm = row_permutation(outputs[2], bbar.dtype(), s);
  return {matmul(mT(perm, s), bbar, s)};
}

std::vector<array> LUF::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  StreamOrDevice s = stream();
  const array& a = primals[0];
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto outs = detail::lu_outputs(a, s);
  auto p = lu_parts(outs[0], s);
  auto db = matmul(row_permutation(outs[2], a.dtype(), s), tangents[0], s);
  auto f = matmul(p.l1_inv, matmul(block(db, 0, k, 0, k, s), p.u1_inv, s), s);
  auto dl = matmul(p.l1, tril(f, -1, s), s);
  auto du = matmul(triu(f, 0, s), p.u1, s);
  auto dlu = add(dl, du, s);
  if (m > k) {
    auto db2 = block(db, k, m, 0, n, s);
    auto dl2 = matmul(subtract(db2, matmul(*p.extra, du, s), s), p.u1_inv, s);
    dlu = concatenate({dlu, dl2}, -2, s);
  } else if (n > k) {
    auto db2 = block(db, 0, m, k, n, s);
    auto du2 = matmul(p.l1_inv, subtract(db2, matmul(dl, *p.extra, s), s), s);
    dlu = concatenate({dlu, du2}, -1, s);
  }
  return {dlu, zeros_like(outs[1], s), zeros_like(outs[2], s)};
}

std::pair<std::vector<array>, std::vector<int>> LUF::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  return {detail::lu_outputs(batch_first(inputs[0], axes[0], s), s), {0, 0, 0}};
}

// ---- Eigh ----
// With S = V diag(w) V^T: P = V^T dS V, dw = diag(P), dV = V (F o P) where
// F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it.
namespace {

array eigen_gaps(const array& w, StreamOrDevice s) {
  int n = w.shape(-1);
  auto diff = subtract(expand_dims(w, -2, s), expand_dims(w, -1, s), s);
  auto id = eye_of(n, w.dtype(), s);
  auto off = subtract(array(1, w.dtype()), id, s);
  return divide(off, add(diff, id, s), s);
}

} // namespace

std::vector<array> Eigh::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>&,
                             const std::vector<array>& outputs) {
  if (primals[0].dtype() == complex64) {
    detail::invalid("linalg::eigh",
                    "gradients of complex decompositions are not supported "
                    "(input " + detail::describe(primals[0]) + ").");
  }
  StreamOrDevice s = stream();
  bool upper = uplo_ == 'U';
  const array& w = outputs[0];
  int n = w.shape(-1);
  auto inner =
      multiply(eye_of(n, w.dtype(), s), expand_dims(cotangents[0], -2, s), s);
  array v = vectors_
                ? outputs[1]
                : linalg::eigh(primals[0], std::string(1, uplo_), s).second;
  if (vectors_) {
    auto vv = matmul(mT(v, s), cotangents[1], s);
    inner = add(inner, multiply(eigen_gaps(w, s), vv, s), s);
  }
  auto g = matmul(v, matmul(inner, mT(v, s), s), s);
  return {fold_to_triangle(g, upper, s)};
}

std::vector<array> Eigh::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>&) {
  if (primals[0].dtype() == complex64) {
    detail::invalid("linalg::eigh",
                    "gradients of complex decompositions are not supported "
                    "(input " + detail::describe(primals[0]) + ").");
  }
  StreamOrDevice s = stream();
  auto [w, v] = linalg::eigh(primals[0], std::string(1, uplo_), s);
  int n = w.shape(-1);
  auto ds = mirror_triangle(tangents[0], uplo_ == 'U', s);
  auto p = matmul(mT(v, s), matmul(ds, v, s), s);
  auto dw = sum(multiply(p, eye_of(n, w.dtype(), s), s), -1, false, s);
  if (!vectors_) return {dw};
  return {dw, matmul(v, multiply(eigen_gaps(w, s), p, s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Eigh::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  auto a = batch_first(inputs[0], axes[0], s);
  std::string uplo(1, uplo_);
  if (!vectors_) return {{linalg::eigvalsh(a, uplo, s)}, {0}};
  auto [w, v] = linalg::eigh(a, uplo, s);
  return {{w, v}, {0, 0}};
}

// ---- Eig ----
// Not differentiable, as in MLX: eigenvectors of a general matrix are
// defined only up to a complex phase.
std::vector<array> Eig::vjp(const std::vector<array>& primals,
                            const std::vector<array>&, const std::vector<int>&,
                            const std::vector<array>&) {
  detail::invalid(vectors_ ? "linalg::eig" : "linalg::eigvals",
                  "gradients are not supported (input " +
                      detail::describe(primals[0]) + ").");
}

std::vector<array> Eig::jvp(const std::vector<array>& primals,
                            const std::vector<array>&,
                            const std::vector<int>&) {
  detail::invalid(vectors_ ? "linalg::eig" : "linalg::eigvals",
                  "gradients are not supported (input " +
                      detail::describe(primals[0]) + ").");
}

std::pair<std::vector<array>, std::vector<int>> Eig::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  auto a = batch_first(inputs[0], axes[0], s);
  if (!vectors_) return {{linalg::eigvals(a, s)}, {0}};
  auto [w, v] = linalg::eig(a, s);
  return {{w, v}, {0, 0}};
}

} // namespace kiln
