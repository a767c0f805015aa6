// Linear algebra on the GPU through cuSOLVER (cusolver.h), for float32 and
// float64: Cholesky, TriangularInverse, Inverse, Solve and Eigh. Other
// dtypes, other primitives (QRF, LUF, SVD, Eig) and machines without
// cuSOLVER run them on the CPU (fallback.cpp).
//
// A row-major matrix is the column-major transpose, so: a triangle read
// row-major is the other one column-major (the routines get the flipped
// fill mode); the inverse of the transpose, read back row-major, is the
// inverse; and a solve works on the transposed system's factors (getrs with
// op T). Failures (a singular matrix, one not positive definite) are read
// back and raised as on the CPU, which waits for the GPU, as PyTorch's
// checked factorizations do.
#include <string>
#include <utility>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cusolver.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/core/layout.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

namespace {

using cuda::JitKernel;

JitKernel keep_triangle_kernel(Dtype dt) {
  return {"gKeepTriangle" + dtype_name(dt),
          "#include \"kiln/backend/cuda/device/linalg.cuh\"\n",
          std::string("kiln::cuda::keep_triangle<") + cuda::device_type(dt) +
              ">",
          {{"gIdentity" + dtype_name(dt),
            std::string("kiln::cuda::identity<") + cuda::device_type(dt) +
                ">"}}};
}

JitKernel identity_kernel(Dtype dt) {
  JitKernel k = keep_triangle_kernel(dt);
  return {k.siblings[0].first, k.source, k.siblings[0].second,
          {{k.name, k.expression}}};
}

// Zeroes what lies outside the lower (or upper) triangle of each matrix of
// the row-major a.
void keep_triangle(array& a, int64_t n, bool upper, const Stream& s) {
  int64_t total = static_cast<int64_t>(a.size());
  void* ptr = cuda::device_ptr(a, s);
  void* args[] = {&ptr, &n, &total, &upper};
  cuda::launch(cuda::get_kernel(keep_triangle_kernel(a.dtype())), total, 1,
               args, s.index);
}

// A fresh row-major batch of identity matrices of out's shape.
void set_identity(array& out, int64_t n, const Stream& s) {
  cuda::set_device_output(out, s);
  int64_t total = static_cast<int64_t>(out.size());
  void* ptr = out.raw_data_ptr();
  void* args[] = {&ptr, &n, &total};
  cuda::launch(cuda::get_kernel(identity_kernel(out.dtype())), total, 1, args,
               s.index);
}

int64_t batch_of(const array& a) {
  int64_t n = a.shape(-1) * a.shape(-2);
  return n > 0 ? static_cast<int64_t>(a.size()) / n : 0;
}

// The view of a with its last two axes swapped (no copy).
array swapped_view(const array& a) {
  Shape shape = a.shape();
  Strides strides = a.strides();
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  auto l = layout_of(shape, strides);
  array v = array::uninitialized(shape, a.dtype());
  v.copy_shared_buffer(a, strides, l.flags, l.data_size);
  return v;
}

// Device ints for a batch's statuses.
struct Info {
  Info(int64_t batch, const Stream& s)
      : scratch(sizeof(int) * static_cast<size_t>(batch > 0 ? batch : 1), s),
        batch(batch) {}
  int* ptr() { return static_cast<int*>(scratch.ptr); }
  /** The first positive status as (matrix, value), read back. */
  std::pair<int64_t, int> first_failure(const Stream& s) {
    auto v = cuda::cusolver::read_info(ptr(), batch, s);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != 0) return {static_cast<int64_t>(i), v[i]};
    }
    return {-1, 0};
  }
  cuda::Scratch scratch;
  int64_t batch;
};

std::string singular_u(int info) {
  return "the matrix is singular (U[" + std::to_string(info - 1) + ", " +
         std::to_string(info - 1) + "] is exactly zero)";
}

bool runs_here(const array& a) {
  return cuda::cusolver::supports(a.dtype()) && a.size() > 0;
}

// Factors the row-major matrices of `lu` in place (as their transposes,
// column-major); raises for a singular one as `op` does on the CPU.
void lu_factor(const char* op, array& lu, array& pivots, const Stream& s) {
  int64_t n = lu.shape(-1), batch = batch_of(lu);
  cuda::set_device_output(pivots, s);
  Info info(batch, s);
  cuda::cusolver::getrf(n, batch, lu.dtype(), cuda::device_ptr(lu, s),
                        cuda::device_ptr<int64_t>(pivots, s), info.ptr(), s);
  auto [i, v] = info.first_failure(s);
  if (i >= 0) linalg_failure(op, i, batch, singular_u(v));
}

} // namespace

void Cholesky::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  if (!runs_here(a) || !cuda::copy_row_major(a, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  Info info(batch, stream());
  cuda::cusolver::potrf(!upper_, n, batch, a.dtype(),
                        cuda::device_ptr(out, stream()), info.ptr(), stream());
  auto [i, v] = info.first_failure(stream());
  if (i >= 0) {
    linalg_failure("linalg::cholesky", i, batch,
                   "the matrix is not positive definite (leading minor " +
                       std::to_string(v) + ")");
  }
  keep_triangle(out, n, upper_, stream());
}

void TriangularInverse::eval_gpu(const std::vector<array>& inputs,
                                 array& out) {
  const array& a = inputs[0];
  if (!runs_here(a) || !cuda::copy_row_major(a, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  Info info(batch, stream());
  cuda::cusolver::trtri(!upper_, n, batch, a.dtype(),
                        cuda::device_ptr(out, stream()), info.ptr(), stream());
  auto [i, v] = info.first_failure(stream());
  if (i >= 0) {
    linalg_failure("linalg::tri_inv", i, batch,
                   "the matrix is singular (its diagonal entry " +
                       std::to_string(v - 1) + " is zero)");
  }
  keep_triangle(out, n, upper_, stream());
}

void Inverse::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  array lu = array::uninitialized(a.shape(), a.dtype());
  if (!runs_here(a) || !cuda::copy_row_major(a, lu, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  Shape ps(a.shape().begin(), a.shape().end() - 1);
  array pivots = array::uninitialized(ps, int64);
  lu_factor("linalg::inv", lu, pivots, stream());
  // (A^T)^-1 column-major is A^-1 row-major.
  set_identity(out, n, stream());
  Info info(batch, stream());
  cuda::cusolver::getrs(false, n, n, batch, a.dtype(),
                        cuda::device_ptr(lu, stream()),
                        cuda::device_ptr<int64_t>(pivots, stream()),
                        out.raw_data_ptr(), info.ptr(), stream());
}

void Solve::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  array lu = array::uninitialized(a.shape(), a.dtype());
  if (!runs_here(a) || b.dtype() != a.dtype() || b.size() == 0 ||
      !cuda::copy_row_major(a, lu, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  int64_t n = a.shape(-1), r = b.shape(-1), batch = batch_of(a);
  Shape ps(a.shape().begin(), a.shape().end() - 1);
  array pivots = array::uninitialized(ps, int64);
  lu_factor("linalg::solve", lu, pivots, stream());
  // The right sides column-major (b's transpose row-major), solved in place
  // with A = (A^T)^T from the factors of the transpose, then read back as
  // the transpose.
  array x = array::uninitialized(swapped_view(b).shape(), b.dtype());
  if (!cuda::copy_row_major(swapped_view(b), x, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  Info info(batch, stream());
  cuda::cusolver::getrs(true, n, r, batch, a.dtype(),
                        cuda::device_ptr(lu, stream()),
                        cuda::device_ptr<int64_t>(pivots, stream()),
                        cuda::device_ptr(x, stream()), info.ptr(), stream());
  if (!cuda::copy_row_major(swapped_view(x), out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void Eigh::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const array& a = inputs[0];
  array vectors = array::uninitialized(a.shape(), a.dtype());
  if (!runs_here(a) || !cuda::copy_row_major(a, vectors, stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  cuda::set_device_output(outputs[0], stream());
  Info info(batch, stream());
  cuda::cusolver::syevd(vectors_, uplo_ == 'L', n, batch, a.dtype(),
                        cuda::device_ptr(vectors, stream()),
                        outputs[0].raw_data_ptr(), info.ptr(), stream());
  auto [i, v] = info.first_failure(stream());
  const char* op = vectors_ ? "linalg::eigh" : "linalg::eigvalsh";
  if (i >= 0) linalg_failure(op, i, batch, "the solver did not converge");
  // Eigenvectors are the columns of the column-major result: its rows read
  // row-major.
  if (vectors_ &&
      !cuda::copy_row_major(swapped_view(vectors), outputs[1], stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
  }
}

} // namespace kiln
