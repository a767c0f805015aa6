// Transformation rules of the factorizations: Cholesky, QR and SVD. Each
// derivative is written for the forward (jvp) and the adjoint (vjp) form;
// the tests check that the two agree and match finite differences.
#include <optional>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
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

array eye_like(int n, const array& like, StreamOrDevice s) {
  return eye(n, n, 0, like.dtype(), s);
}

// Columns [lo, hi) of a stack of matrices.
array cols(const array& x, int lo, int hi, StreamOrDevice s) {
  Shape start(x.ndim(), 0), stop = x.shape();
  start.back() = lo;
  stop.back() = hi;
  return slice(x, start, stop, s);
}

// ---- Cholesky ----
// Phi(X): the lower triangle of X with its diagonal halved.
array phi(const array& x, StreamOrDevice s) {
  int n = x.shape(-1);
  auto half = multiply(eye_like(n, x, s), array(0.5, x.dtype()), s);
  return multiply(x, subtract(tri(n, n, 0, x.dtype(), s), half, s), s);
}

// A = L L^T with dL = L Phi(L^-1 dA L^-T) for a symmetric dA. The factor
// reads only A's lower triangle, so dA is that triangle mirrored, and the
// cotangent of the upper triangle is zero.
array cholesky_lower_jvp(const array& l, const array& da, StreamOrDevice s) {
  int n = l.shape(-1);
  auto low = tril(da, -1, s);
  auto sym =
      add(add(low, mT(low, s), s), multiply(da, eye_like(n, da, s), s), s);
  auto linv = linalg::inv(l, s);
  return matmul(l, phi(matmul(linv, matmul(sym, mT(linv, s), s), s), s), s);
}

array cholesky_lower_vjp(const array& l, const array& lbar, StreamOrDevice s) {
  auto linv = linalg::inv(l, s);
  auto g = matmul(mT(linv, s),
                  matmul(phi(matmul(mT(l, s), lbar, s), s), linv, s), s);
  // Each off-diagonal entry of the lower triangle stands for both g_ij and
  // g_ji; Phi keeps the lower triangle and halves the doubled diagonal.
  return phi(add(g, mT(g, s), s), s);
}

// ---- QR ----
// X R^-1 and X R^-T for an upper triangular R.
array times_inv(const array& x, const array& r, StreamOrDevice s) {
  return mT(linalg::solve(mT(r, s), mT(x, s), s), s);
}
array times_inv_t(const array& x, const array& r, StreamOrDevice s) {
  return mT(linalg::solve(r, mT(x, s), s), s);
}

// Reduced QR of a matrix with M >= N (R square). With C = Q^T dA R^-1 and
// Omega = Q^T dQ (skew): dR = (C - Omega) R, dQ = dA R^-1 - Q (C - Omega).
std::pair<array, array> qr_tall_jvp(const array& q, const array& r,
                                    const array& da, StreamOrDevice s) {
  auto z = times_inv(da, r, s);
  auto c = matmul(mT(q, s), z, s);
  auto low = tril(c, -1, s);
  auto upper = subtract(add(c, mT(low, s), s), low, s);
  return {subtract(z, matmul(q, upper, s), s), matmul(upper, r, s)};
}

// The adjoint: dA = (Qbar + Q B) R^-T with B the symmetric matrix built from
// the upper triangle of Rbar R^T - Q^T Qbar.
array qr_tall_vjp(const array& q, const array& r, const array& qbar,
                  const array& rbar, StreamOrDevice s) {
  auto d = subtract(matmul(rbar, mT(r, s), s), matmul(mT(q, s), qbar, s), s);
  auto b = add(triu(d, 0, s), mT(triu(d, 1, s), s), s);
  return times_inv_t(add(qbar, matmul(q, b, s), s), r, s);
}

// ---- SVD ----
// F_ij = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it (without dividing by
// zero there, so higher derivatives stay finite).
array f_matrix(const array& sv, StreamOrDevice s) {
  int k = sv.shape(-1);
  auto s2 = square(sv, s);
  auto diff = subtract(expand_dims(s2, -2, s), expand_dims(s2, -1, s), s);
  auto id = eye_like(k, sv, s);
  auto off = subtract(array(1.0, sv.dtype()), id, s);
  return divide(off, add(diff, id, s), s);
}

// The thin factors U_k (M, K), V_k (N, K) and, when U or Vt is wider than K,
// the complement columns U_c, V_c of the full factors.
struct SvdParts {
  array uk, vk;
  std::optional<array> uc, vc;
};

SvdParts svd_parts(const array& u, const array& vt, int k, StreamOrDevice s) {
  int m = u.shape(-1), n = vt.shape(-1);
  auto v = mT(vt, s);
  SvdParts p{cols(u, 0, k, s), cols(v, 0, k, s), std::nullopt, std::nullopt};
  if (m > k) p.uc = cols(u, k, m, s);
  if (n > k) p.vc = cols(v, k, n, s);
  return p;
}

// x - U (U^T x): the part of x outside U's columns.
array off_span(const array& u, const array& x, StreamOrDevice s) {
  return subtract(x, matmul(u, matmul(mT(u, s), x, s), s), s);
}

} // namespace

// ---- Cholesky ----
std::vector<array> Cholesky::vjp(const std::vector<array>&,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>&,
                                 const std::vector<array>& outputs) {
  // The upper factor of A is the transposed lower factor of A^T.
  StreamOrDevice s = stream();
  if (!upper_) return {cholesky_lower_vjp(outputs[0], cotangents[0], s)};
  return {
      mT(cholesky_lower_vjp(mT(outputs[0], s), mT(cotangents[0], s), s), s)};
}

std::vector<array> Cholesky::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>&) {
  StreamOrDevice s = stream();
  auto f = linalg::cholesky(primals[0], upper_, s);
  if (!upper_) return {cholesky_lower_jvp(f, tangents[0], s)};
  return {mT(cholesky_lower_jvp(mT(f, s), mT(tangents[0], s), s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Cholesky::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  auto a = batch_first(inputs[0], axes[0], s);
  return {{linalg::cholesky(a, upper_, s)}, {0}};
}

// ---- QRF ----
// A wide matrix (M < N) splits as A = [X | Y] with X square: X = Q U is a
// square QR, and R = [U | V] with V = Q^T Y.
std::vector<array> QRF::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  StreamOrDevice s = stream();
  const array &a = primals[0], &q = outputs[0], &r = outputs[1];
  int m = a.shape(-2), n = a.shape(-1);
  if (m >= n) return {qr_tall_vjp(q, r, cotangents[0], cotangents[1], s)};
  auto y = cols(a, m, n, s);
  auto ubar = cols(cotangents[1], 0, m, s);
  auto vbar = cols(cotangents[1], m, n, s);
  auto qbar = add(cotangents[0], matmul(y, mT(vbar, s), s), s);
  auto xbar = qr_tall_vjp(q, cols(r, 0, m, s), qbar, ubar, s);
  return {concatenate({xbar, matmul(q, vbar, s)}, -1, s)};
}

std::vector<array> QRF::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  StreamOrDevice s = stream();
  const array& a = primals[0];
  const array& da = tangents[0];
  auto [q, r] = linalg::qr(a, s);
  int m = a.shape(-2), n = a.shape(-1);
  if (m >= n) {
    auto [dq, dr] = qr_tall_jvp(q, r, da, s);
    return {dq, dr};
  }
  auto [dq, du] = qr_tall_jvp(q, cols(r, 0, m, s), cols(da, 0, m, s), s);
  auto dv = add(matmul(mT(dq, s), cols(a, m, n, s), s),
                matmul(mT(q, s), cols(da, m, n, s), s), s);
  return {dq, concatenate({du, dv}, -1, s)};
}

std::pair<std::vector<array>, std::vector<int>> QRF::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  auto [q, r] = linalg::qr(batch_first(inputs[0], axes[0], s), s);
  return {{q, r}, {0, 0}};
}

// ---- SVD ----
// With A = U S V^T (thin), dP = U^T dA V and F as above (Townsend, 2016):
//   dS = diag(dP)
//   dU = U (F o (dP S + S dP^T)) + (I - U U^T) dA V S^-1
//   dV = V (F o (S dP + dP^T S)) + (I - V V^T) dA^T U S^-1
// The complement columns of the full U (or V) turn with the least rotation
// that keeps them orthogonal to U_k: dU_c = -U_k dU_k^T U_c.
std::vector<array> SVD::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  if (primals[0].dtype() == complex64) {
    detail::invalid("linalg::svd",
                    "gradients of complex decompositions are not supported "
                    "(input " + detail::describe(primals[0]) + ").");
  }
  StreamOrDevice s = stream();
  const array& a = primals[0];
  const array& sv = compute_uv_ ? outputs[1] : outputs[0];
  int k = sv.shape(-1);
  auto srow = expand_dims(sv, -2, s);
  auto scol = expand_dims(sv, -1, s);
  auto id = eye_like(k, sv, s);
  const array& sbar = compute_uv_ ? cotangents[1] : cotangents[0];
  auto dsig = multiply(id, expand_dims(sbar, -2, s), s);
  if (!compute_uv_) {
    auto f = linalg::svd(a, true, s);
    auto p = svd_parts(f[0], f[2], k, s);
    return {matmul(p.uk, matmul(dsig, mT(p.vk, s), s), s)};
  }
  auto p = svd_parts(outputs[0], outputs[2], k, s);
  int m = a.shape(-2), n = a.shape(-1);
  const array& ubar = cotangents[0];
  auto vbar = mT(cotangents[2], s);
  // Fold the complement's cotangent into the thin factor's (the adjoint of
  // dU_c = -U_k dU_k^T U_c).
  auto ubk = cols(ubar, 0, k, s);
  if (p.uc) {
    auto ubc = mT(cols(ubar, k, m, s), s);
    ubk = subtract(ubk, matmul(*p.uc, matmul(ubc, p.uk, s), s), s);
  }
  auto vbk = cols(vbar, 0, k, s);
  if (p.vc) {
    auto vbc = mT(cols(vbar, k, n, s), s);
    vbk = subtract(vbk, matmul(*p.vc, matmul(vbc, p.vk, s), s), s);
  }
  auto f = f_matrix(sv, s);
  auto ju = matmul(mT(p.uk, s), ubk, s);
  auto jv = matmul(mT(p.vk, s), vbk, s);
  ju = multiply(f, subtract(ju, mT(ju, s), s), s);
  jv = multiply(f, subtract(jv, mT(jv, s), s), s);
  auto inner =
      add(add(multiply(ju, srow, s), dsig, s), multiply(scol, jv, s), s);
  auto g = matmul(p.uk, matmul(inner, mT(p.vk, s), s), s);
  if (m > k) {
    auto x = off_span(p.uk, divide(ubk, srow, s), s);
    g = add(g, matmul(x, mT(p.vk, s), s), s);
  }
  if (n > k) {
    auto y = off_span(p.vk, divide(vbk, srow, s), s);
    g = add(g, matmul(p.uk, mT(y, s), s), s);
  }
  return {g};
}

std::vector<array> SVD::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  if (primals[0].dtype() == complex64) {
    detail::invalid("linalg::svd",
                    "gradients of complex decompositions are not supported "
                    "(input " + detail::describe(primals[0]) + ").");
  }
  StreamOrDevice s = stream();
  const array& a = primals[0];
  const array& da = tangents[0];
  auto f = linalg::svd(a, true, s);
  const array& sv = f[1];
  int k = sv.shape(-1), m = a.shape(-2), n = a.shape(-1);
  auto p = svd_parts(f[0], f[2], k, s);
  auto id = eye_like(k, sv, s);
  auto dp = matmul(mT(p.uk, s), matmul(da, p.vk, s), s);
  auto ds = sum(multiply(dp, id, s), -1, false, s);
  if (!compute_uv_) return {ds};
  auto srow = expand_dims(sv, -2, s);
  auto scol = expand_dims(sv, -1, s);
  auto fm = f_matrix(sv, s);
  auto ps = multiply(dp, srow, s);
  auto sp = multiply(scol, dp, s);
  auto duk = matmul(p.uk, multiply(fm, add(ps, mT(ps, s), s), s), s);
  auto dvk = matmul(p.vk, multiply(fm, add(sp, mT(sp, s), s), s), s);
  array du = duk, dv = dvk;
  if (m > k) {
    duk = add(duk, off_span(p.uk, divide(matmul(da, p.vk, s), srow, s), s), s);
    auto duc = negative(matmul(p.uk, matmul(mT(duk, s), *p.uc, s), s), s);
    du = concatenate({duk, duc}, -1, s);
  }
  if (n > k) {
    auto x = divide(matmul(mT(da, s), p.uk, s), srow, s);
    dvk = add(dvk, off_span(p.vk, x, s), s);
    auto dvc = negative(matmul(p.vk, matmul(mT(dvk, s), *p.vc, s), s), s);
    dv = concatenate({dvk, dvc}, -1, s);
  }
  return {du, ds, mT(dv, s)};
}

std::pair<std::vector<array>, std::vector<int>> SVD::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  auto outs = linalg::svd(batch_first(inputs[0], axes[0], s), compute_uv_, s);
  return {outs, std::vector<int>(outs.size(), 0)};
}

} // namespace kiln
