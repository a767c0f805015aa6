// Linear algebra on the GPU through cuSOLVER (cusolver.h), for float32 and
// float64 (Eig: float32, with a cuSOLVER that has geev): here Inverse,
// Cholesky, QRF, SVD and Solve; linalg_eigen.cpp and linalg_lu.cpp the
// rest, as on the CPU. Other dtypes and machines without cuSOLVER run them
// on the CPU.
//
// A row-major matrix is the column-major transpose, which most routines
// take as it is: a triangle read row-major is the other one column-major
// (the routines get the flipped fill mode); the inverse of the transpose,
// read back row-major, is the inverse; a solve uses the transpose's factors
// (getrs with op T); the SVD of the transpose swaps U and V. LU and QR
// factor rows, so they get a transposed copy. Failures (a singular matrix,
// one not positive definite, no convergence) are read back and raised as
// on the CPU, which waits for the GPU, as PyTorch's checked
// factorizations do.
#include <algorithm>
#include <string>

#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/linalg.h"

namespace kiln {

using namespace cuda::dense;

namespace {

// Systems of at most small_order equations and right sides (device/
// linalg.cuh) are solved whole by one kernel, a block each: cuSOLVER's
// routines take one matrix per call, a few kernels and a host round each.
constexpr int small_order = 64;

// The kernel's shared memory for n x n systems with r right sides (its
// small_solve_shared_elements): [A | B] with padded rows, a factor per row.
int small_solve_shared_bytes(int n, int r, Dtype dt) {
  return (n * (n + r + 1) + n) * static_cast<int>(dt.size);
}

bool small_systems(const array& a, int64_t sides) {
  return cuda::cusolver::supports(a.dtype()) && a.size() > 0 &&
         a.shape(-1) <= small_order && sides <= small_order;
}

// x = a^-1 b for the systems of a (row-major copies made as needed), or
// a^-1 when b is null; raises for a singular one as op does on the CPU.
// False (nothing done) when the GPU cannot copy the inputs.
bool solve_small(const char* op, const array& a, const array* b, array& x,
                 const Stream& s) {
  array ar = a, br = b ? *b : a;
  if (!cuda::row_contiguous(a, ar, s) ||
      (b && !cuda::row_contiguous(*b, br, s))) {
    return false;
  }
  int n = a.shape(-1), r = b ? b->shape(-1) : n;
  int64_t batch = batch_of(a);
  cuda::set_device_output(x, s);
  Info info(batch, s);
  void* ap = cuda::device_ptr(ar, s);
  void* bp = b ? cuda::device_ptr(br, s) : nullptr;
  void* xp = x.raw_data_ptr();
  int* ip = info.ptr();
  void* args[] = {&ap, &bp, &xp, &n, &r, &batch, &ip};
  cuda::launch_blocks_shared(
      cuda::get_kernel(cuda::small_solve_kernel(a.dtype())), batch, 128,
      small_solve_shared_bytes(n, r, a.dtype()), args, s.index);
  info.raise_first(op, singular_pivot_reason);
  return true;
}

// Factors the square row-major matrices of lu in place (as their
// transposes, column-major) and returns their 1-based pivots; raises for a
// singular one as op does on the CPU.
array transpose_lu(const char* op, array& lu, const Stream& s) {
  int64_t n = lu.shape(-1), batch = batch_of(lu);
  Shape ps(lu.shape().begin(), lu.shape().end() - 1);
  array pivots = array::uninitialized(ps, int64);
  cuda::set_device_output(pivots, s);
  Info info(batch, s);
  cuda::cusolver::getrf(n, n, batch, lu.dtype(), cuda::device_ptr(lu, s),
                        cuda::device_ptr<int64_t>(pivots, s), info.ptr(), s);
  info.raise_first(op, singular_pivot_reason);
  return pivots;
}

} // namespace

void Inverse::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  if (small_systems(a, a.shape(-1)) &&
      solve_small("linalg::inv", a, nullptr, out, stream())) {
    return;
  }
  array lu = like(a);
  if (!runs_here(a) || !cuda::copy_row_major(a, lu, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  array pivots = transpose_lu("linalg::inv", lu, stream());
  Info info(batch, stream());
  // (A^T)^-1 column-major is A^-1 row-major.
  cuda::set_device_output(out, stream());
  fill_matrices(out, n, n, false, true, stream());
  cuda::cusolver::getrs(false, n, n, batch, a.dtype(),
                        cuda::device_ptr(lu, stream()),
                        cuda::device_ptr<int64_t>(pivots, stream()),
                        out.raw_data_ptr(), info.ptr(), stream());
}

void Cholesky::eval_gpu(const std::vector<array>& inputs, array& out) {
  triangle_routine(*this, inputs, out, upper_, true, cuda::cusolver::potrf,
                   true, "linalg::cholesky", not_positive_definite_reason);
}

void QRF::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array work = a;
  if (!column_major_copy(a, work, stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  int64_t batch = batch_of(a);
  Shape ts(a.shape().begin(), a.shape().end() - 2);
  ts.push_back(static_cast<int>(k));
  array tau = array::uninitialized(ts, a.dtype());
  cuda::set_device_output(tau, stream());
  Info info(batch, stream());
  cuda::cusolver::geqrf(m, n, batch, a.dtype(),
                        cuda::device_ptr(work, stream()),
                        cuda::device_ptr(tau, stream()), info.ptr(), stream());
  // R: the first k rows, upper triangle, read before orgqr overwrites them.
  if (!cuda::copy_row_major(swapped_view(work, k), outputs[1], stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  fill_matrices(outputs[1], k, n, true, false, stream());
  // Q: the first k columns, formed in place.
  cuda::cusolver::orgqr(m, k, k, m * n, batch, a.dtype(),
                        cuda::device_ptr(work, stream()),
                        cuda::device_ptr(tau, stream()), info.ptr(), stream());
  Shape qs = work.shape();
  qs[qs.size() - 2] = static_cast<int>(k); // k columns of m
  array q = swapped_view(strided_view(work, qs, work.strides()));
  if (!cuda::copy_row_major(q, outputs[0], stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
  }
}

namespace {

// The SVD by gesvd (QR iterations), for matrices the Jacobi SVD did not
// converge on. cuSOLVER's gesvd needs rows >= columns: a wide matrix goes
// as it is (its transpose, column-major: A^T = U' S V'^T, so U = V' and
// V^T = U'^T, each the other's buffer read row-major); a tall one as a
// transposed copy, its factors transposed back.
void svd_qr(SVD& p, const std::vector<array>& inputs,
            std::vector<array>& outputs) {
  const array& a = inputs[0];
  const Stream& s = p.stream();
  bool compute_uv = p.compute_uv();
  int64_t m = a.shape(-2), n = a.shape(-1);
  bool wide = n >= m;
  array src = wide ? a : swapped_view(a);
  array work = like(src);
  if (!cuda::copy_row_major(src, work, s)) {
    cuda::eval_on_cpu(p, inputs, outputs);
    return;
  }
  int64_t rows = wide ? n : m, cols = wide ? m : n, batch = batch_of(a);
  array& sv = outputs[compute_uv ? 1 : 0];
  // The column-major factors of the matrix solved: for a wide one, U'
  // (n x n) read row-major is V^T and V'^T (m x m) is U.
  array u = sv, vt = sv;
  if (compute_uv) {
    u = wide ? outputs[2] : like(outputs[0]);
    vt = wide ? outputs[0] : like(outputs[2]);
    cuda::set_device_output(u, s);
    cuda::set_device_output(vt, s);
  }
  Info info(batch, s);
  cuda::cusolver::gesvd(
      compute_uv, rows, cols, batch, a.dtype(), cuda::device_ptr(work, s),
      sv.raw_data_ptr(), compute_uv ? u.raw_data_ptr() : nullptr,
      compute_uv ? vt.raw_data_ptr() : nullptr, info.ptr(), s);
  info.raise_first("linalg::svd",
                   [](int) { return "the SVD did not converge"; });
  if (compute_uv && !wide &&
      (!cuda::copy_row_major(swapped_view(u), outputs[0], s) ||
       !cuda::copy_row_major(swapped_view(vt), outputs[2], s))) {
    cuda::eval_on_cpu(p, inputs, outputs);
  }
}

} // namespace

// One-sided Jacobi first, as PyTorch does (gesvdj: 2.4x gesvd's speed at
// order 1024), on the row-major buffer read column-major: A^T (n x m) =
// V S U^T, so its U (n x n) read row-major is V^T, the output as it is,
// and its V (m x m) read row-major is U^T, transposed into the output. A
// batch with a matrix it did not converge on is redone by gesvd. Matrices
// up to 32 x 32, one or a batch, are one gesvdjBatched call, not the
// host's. That one reports no failure to converge: its 100-sweep limit
// is the only guard (Jacobi converges quadratically).
void SVD::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array work = like(a);
  bool batched = std::max(a.shape(-1), a.shape(-2)) <=
                 cuda::cusolver::gesvdj_batched_max;
  if (!runs_here(a, batched) || !cuda::copy_row_major(a, work, stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  int64_t m = a.shape(-2), n = a.shape(-1), batch = batch_of(a);
  array& sv = outputs[compute_uv_ ? 1 : 0];
  cuda::set_device_output(sv, stream());
  array ut = sv;
  if (compute_uv_) {
    cuda::set_device_output(outputs[2], stream());
    ut = like(outputs[0]);
    cuda::set_device_output(ut, stream());
  }
  Info info(batch, stream());
  cuda::cusolver::gesvdj(
      compute_uv_, n, m, batch, a.dtype(), cuda::device_ptr(work, stream()),
      sv.raw_data_ptr(), compute_uv_ ? outputs[2].raw_data_ptr() : nullptr,
      compute_uv_ ? ut.raw_data_ptr() : nullptr, info.ptr(), stream());
  if (info.any_positive()) {
    svd_qr(*this, inputs, outputs);
  } else if (compute_uv_ &&
             !cuda::copy_row_major(swapped_view(ut), outputs[0], stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
  }
}

void Solve::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  if (small_systems(a, b.shape(-1)) && b.dtype() == a.dtype() &&
      b.size() > 0 && solve_small("linalg::solve", a, &b, out, stream())) {
    return;
  }
  // The right sides column-major (b's transpose row-major), solved in place
  // with A = (A^T)^T from the factors of the transpose, read back as the
  // transpose.
  array bt = swapped_view(b);
  array lu = like(a), x = like(bt);
  if (!runs_here(a) || b.dtype() != a.dtype() || b.size() == 0 ||
      !cuda::copy_row_major(a, lu, stream()) ||
      !cuda::copy_row_major(bt, x, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  int64_t n = a.shape(-1), r = b.shape(-1), batch = batch_of(a);
  array pivots = transpose_lu("linalg::solve", lu, stream());
  Info info(batch, stream());
  cuda::cusolver::getrs(true, n, r, batch, a.dtype(),
                        cuda::device_ptr(lu, stream()),
                        cuda::device_ptr<int64_t>(pivots, stream()),
                        cuda::device_ptr(x, stream()), info.ptr(), stream());
  if (!cuda::copy_row_major(swapped_view(x), out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

} // namespace kiln
