// Transformation rules of the triangular inverse, the LU factorization and
// the eigendecompositions. As in factorization_grads.cpp, each derivative
// has a forward (jvp) and an adjoint (vjp) form that the tests check
// against each other and against finite differences.
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

namespace {

array mT(const array& x, StreamOrDevice s) { return swapaxes(x, -1, -2, s); }

array batch_first(const array& x, int axis, StreamOrDevice s) {
  return axis <= 0 ? x : moveaxis(x, axis, 0, s);
}

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
namespace {

void check_square_lu(const array& a) {
  if (a.shape(-1) != a.shape(-2)) {
    detail::invalid("linalg::lu_factor",
                    "gradients are only defined for square matrices, got " +
                        detail::describe(a) + ".");
  }
}

// P with (P a)[r] = a[order[r]], from perm (a[i] = (L U)[perm[i]]):
// P[r, c] = 1 where perm[c] == r.
array row_permutation(const array& perm, Dtype dt, StreamOrDevice s) {
  int n = perm.shape(-1);
  auto rows = reshape(arange(0, n, 1, s), {n, 1}, s);
  return astype(equal(expand_dims(perm, -2, s), rows, s), dt, s);
}

struct LuParts {
  array l, u;
};

LuParts lu_parts(const array& lu, StreamOrDevice s) {
  int n = lu.shape(-1);
  return {add(tril(lu, -1, s), eye_of(n, lu.dtype(), s), s), triu(lu, 0, s)};
}

} // namespace

std::vector<array> LUF::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  StreamOrDevice s = stream();
  check_square_lu(primals[0]);
  auto [l, u] = lu_parts(outputs[0], s);
  const array& bar = cotangents[0];
  auto g = add(tril(matmul(mT(l, s), tril(bar, -1, s), s), -1, s),
               triu(matmul(triu(bar, 0, s), mT(u, s), s), 0, s), s);
  auto li = linalg::tri_inv(l, false, s);
  auto ui = linalg::tri_inv(u, true, s);
  auto mbar = matmul(mT(li, s), matmul(g, mT(ui, s), s), s);
  auto p = row_permutation(outputs[2], mbar.dtype(), s);
  return {matmul(mT(p, s), mbar, s)};
}

std::vector<array> LUF::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  StreamOrDevice s = stream();
  const array& a = primals[0];
  check_square_lu(a);
  auto outs = detail::lu_outputs(a, s);
  auto [l, u] = lu_parts(outs[0], s);
  auto dm = matmul(row_permutation(outs[2], a.dtype(), s), tangents[0], s);
  auto f = matmul(linalg::tri_inv(l, false, s),
                  matmul(dm, linalg::tri_inv(u, true, s), s), s);
  auto dlu = add(matmul(l, tril(f, -1, s), s), matmul(triu(f, 0, s), u, s), s);
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
