#include "kiln/primitives/linalg.h"

#include <algorithm>
#include <stdexcept>

namespace kiln {

void linalg_failure(const char* op, size_t batch, size_t nbatch,
                    const std::string& what) {
  std::string where =
      nbatch > 1 ? " (matrix " + std::to_string(batch) + " of the batch)" : "";
  throw std::runtime_error(std::string("[") + op + "] " + what + where + ".");
}

std::string singular_pivot_reason(int info) {
  return "the matrix is singular (U[" + std::to_string(info - 1) + ", " +
         std::to_string(info - 1) + "] is exactly zero)";
}

std::string not_positive_definite_reason(int info) {
  return "the matrix is not positive definite (leading minor " +
         std::to_string(info) + ")";
}

std::string zero_diagonal_reason(int info) {
  return "the matrix is singular (its diagonal entry " +
         std::to_string(info - 1) + " is zero)";
}

namespace {

Shape product_shape(const array& a, const array& b) {
  Shape s = a.shape();
  s.back() = b.shape().back();
  return s;
}

} // namespace

std::vector<Shape> Matmul::output_shapes(const std::vector<array>& inputs) {
  return {product_shape(inputs[0], inputs[1])};
}

std::vector<Shape> AddMM::output_shapes(const std::vector<array>& inputs) {
  return {product_shape(inputs[1], inputs[2])};
}

std::vector<Shape> GatherMM::output_shapes(const std::vector<array>& inputs) {
  Shape s = inputs[2].shape();
  s.insert(s.end(), {inputs[0].shape(-2), inputs[1].shape(-1)});
  return {s};
}

std::vector<Shape> SegmentedMM::output_shapes(
    const std::vector<array>& inputs) {
  return {{inputs[2].shape(0), inputs[0].shape(0), inputs[1].shape(1)}};
}

std::vector<Shape> QRF::output_shapes(const std::vector<array>& inputs) {
  Shape q = inputs[0].shape();
  Shape r = q;
  int m = q[q.size() - 2], n = q.back();
  int k = std::min(m, n);
  q.back() = k;
  r[r.size() - 2] = k;
  return {q, r};
}

std::vector<Shape> SVD::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  int m = a[a.size() - 2], n = a.back();
  Shape batch(a.begin(), a.end() - 2);
  Shape s = batch;
  s.push_back(std::min(m, n));
  if (!compute_uv_) return {s};
  Shape u = batch, vt = batch;
  u.insert(u.end(), {m, m});
  vt.insert(vt.end(), {n, n});
  return {u, s, vt};
}

std::vector<Shape> LUF::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  int m = a[a.size() - 2], n = a.back();
  Shape pivots(a.begin(), a.end() - 1);
  pivots.back() = std::min(m, n);
  Shape perm(a.begin(), a.end() - 1);
  return {a, pivots, perm};
}

namespace {

// Eigenvalues (..., N) and, when asked for, vectors (..., N, N).
std::vector<Shape> eigen_shapes(const array& a, bool vectors) {
  Shape w(a.shape().begin(), a.shape().end() - 1);
  if (!vectors) return {w};
  return {w, a.shape()};
}

} // namespace

std::vector<Shape> Eigh::output_shapes(const std::vector<array>& inputs) {
  return eigen_shapes(inputs[0], vectors_);
}

std::vector<Shape> Eig::output_shapes(const std::vector<array>& inputs) {
  return eigen_shapes(inputs[0], vectors_);
}

} // namespace kiln
