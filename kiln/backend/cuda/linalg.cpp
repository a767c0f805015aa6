// Linear algebra on the GPU through cuSOLVER (cusolver.h), for float32 and
// float64 (Eig: float32, with a cuSOLVER that has geev). Other dtypes and
// machines without cuSOLVER run them on the CPU.
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
#include <utility>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cusolver.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/linalg.h"
#include "kiln/core/layout.h"
#include "kiln/primitives/linalg.h"

namespace kiln::cuda {

JitKernel linalg_fill_kernel(Dtype dt, bool identity) {
  std::string type = device_type(dt);
  std::pair<std::string, std::string> keep = {
      "gKeepTriangle" + dtype_name(dt),
      "kiln::cuda::keep_triangle<" + type + ">"};
  std::pair<std::string, std::string> eye = {
      "gIdentity" + dtype_name(dt), "kiln::cuda::identity<" + type + ">"};
  if (identity) std::swap(keep, eye);
  return {keep.first, "#include \"kiln/backend/cuda/device/linalg.cuh\"\n",
          keep.second, {eye}};
}

JitKernel eig_vectors_kernel() {
  return {"gEigVectorsfloat32",
          "#include \"kiln/backend/cuda/device/linalg.cuh\"\n",
          "kiln::cuda::eig_vectors<float>", {}};
}

JitKernel small_solve_kernel(Dtype dt) {
  return {"gSmallSolve" + dtype_name(dt),
          "#include \"kiln/backend/cuda/device/linalg.cuh\"\n",
          std::string("kiln::cuda::small_solve<") + device_type(dt) + ">",
          {}};
}

JitKernel lu_pivots_kernel() {
  return {"gLuPivots", "#include \"kiln/backend/cuda/device/linalg.cuh\"\n",
          "kiln::cuda::lu_pivots<int64_t>", {}};
}

} // namespace kiln::cuda

namespace kiln {

namespace {

// Over the row-major rows x cols matrices of a: zero what lies outside
// the lower (or upper) triangle, or with identity write identities.
void fill(array& a, int64_t rows, int64_t cols, bool upper, bool identity,
          const Stream& s) {
  int64_t total = static_cast<int64_t>(a.size());
  void* ptr = identity ? a.raw_data_ptr() : cuda::device_ptr(a, s);
  void* args[] = {&ptr, &rows, &cols, &total, &upper};
  cuda::launch(cuda::get_kernel(cuda::linalg_fill_kernel(a.dtype(), identity)),
               total, 1, args, s.index);
}

int64_t batch_of(const array& a) {
  int64_t n = a.shape(-1) * a.shape(-2);
  return n > 0 ? static_cast<int64_t>(a.size()) / n : 0;
}

// A view of a's buffer with this shape and these strides (no copy).
array view(const array& a, Shape shape, const Strides& strides) {
  auto l = layout_of(shape, strides);
  array v = array::uninitialized(std::move(shape), a.dtype());
  v.copy_shared_buffer(a, strides, l.flags, l.data_size);
  return v;
}

// The view of a with its last two axes swapped, its first `rows` rows
// (all when negative).
array swapped_view(const array& a, int64_t rows = -1) {
  Shape shape = a.shape();
  Strides strides = a.strides();
  size_t d = shape.size();
  std::swap(shape[d - 1], shape[d - 2]);
  std::swap(strides[d - 1], strides[d - 2]);
  if (rows >= 0) shape[d - 2] = static_cast<int>(rows);
  return view(a, std::move(shape), strides);
}

// A fresh array for a row-major copy of x (copy_row_major fills it).
array like(const array& x) {
  return array::uninitialized(x.shape(), x.dtype());
}

// Device ints for a batch's statuses.
class Info {
 public:
  Info(int64_t batch, const Stream& s)
      : scratch_(sizeof(int) * static_cast<size_t>(std::max<int64_t>(batch, 1)),
                 s),
        batch_(batch),
        stream_(s) {}
  Info(const Info&) = delete;
  Info& operator=(const Info&) = delete;
  int* ptr() { return static_cast<int*>(scratch_.ptr); }
  /** Raises linalg_failure(op, i, ...) for the first matrix i whose status
   *  is positive, with what(status) as the reason. */
  template <typename What>
  void raise_first(const char* op, What&& what) {
    auto v = cuda::cusolver::read_info(ptr(), batch_, stream_);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] > 0) linalg_failure(op, i, v.size(), what(v[i]));
    }
  }

 private:
  cuda::Scratch scratch_;
  int64_t batch_;
  Stream stream_;
};

std::string singular_u(int info) {
  return "the matrix is singular (U[" + std::to_string(info - 1) + ", " +
         std::to_string(info - 1) + "] is exactly zero)";
}

// Whether cuSOLVER takes a's matrices. Its routines take one matrix per
// call (a few kernels and a host round of their own each), so a batch of
// many small matrices stays on the host's LAPACK, which is faster there
// (its transfers included) than hundreds of calls; Cholesky has a batched
// routine (batched = true).
bool runs_here(const array& a, bool batched = false) {
  constexpr int64_t small_order = 64, many = 16;
  int64_t n = std::max(a.shape(-1), a.shape(-2));
  bool many_small = !batched && n <= small_order && batch_of(a) > many;
  return cuda::cusolver::supports(a.dtype()) && a.size() > 0 && !many_small;
}

// Systems of at most small_order equations and right sides (device/
// linalg.cuh) are solved whole by one kernel, a block each: cuSOLVER's
// routines take one matrix per call, a few kernels and a host round each.
constexpr int small_order = 32;

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
  cuda::launch_blocks(cuda::get_kernel(cuda::small_solve_kernel(a.dtype())),
                      batch, 128, args, s.index);
  info.raise_first(op, singular_u);
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
  info.raise_first(op, singular_u);
  return pivots;
}

} // namespace

void Cholesky::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  if (!runs_here(a, true) || !cuda::copy_row_major(a, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  Info info(batch, stream());
  cuda::cusolver::potrf(!upper_, n, batch, a.dtype(),
                        cuda::device_ptr(out, stream()), info.ptr(), stream());
  info.raise_first("linalg::cholesky", [](int v) {
    return "the matrix is not positive definite (leading minor " +
           std::to_string(v) + ")";
  });
  fill(out, n, n, upper_, false, stream());
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
  info.raise_first("linalg::tri_inv", [](int v) {
    return "the matrix is singular (its diagonal entry " +
           std::to_string(v - 1) + " is zero)";
  });
  fill(out, n, n, upper_, false, stream());
}

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
  fill(out, n, n, false, true, stream());
  cuda::cusolver::getrs(false, n, n, batch, a.dtype(),
                        cuda::device_ptr(lu, stream()),
                        cuda::device_ptr<int64_t>(pivots, stream()),
                        out.raw_data_ptr(), info.ptr(), stream());
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

void Eigh::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const array& a = inputs[0];
  bool batched = batch_of(a) > 1 &&
                 a.shape(-1) <= cuda::cusolver::syevj_batched_max_n;
  array vectors = like(a);
  if (!runs_here(a, batched) || !cuda::copy_row_major(a, vectors, stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  cuda::set_device_output(outputs[0], stream());
  Info info(batch, stream());
  (batched ? cuda::cusolver::syevj_batched : cuda::cusolver::syevd)(
      vectors_, uplo_ == 'L', n, batch, a.dtype(),
      cuda::device_ptr(vectors, stream()), outputs[0].raw_data_ptr(),
      info.ptr(), stream());
  info.raise_first(vectors_ ? "linalg::eigh" : "linalg::eigvalsh",
                   [](int) { return "the solver did not converge"; });
  // The eigenvectors are the columns of the column-major result: its rows
  // read row-major.
  if (vectors_ &&
      !cuda::copy_row_major(swapped_view(vectors), outputs[1], stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
  }
}

void LUF::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array at = swapped_view(a);
  array work = like(at); // a column-major: its transpose row-major
  if (!runs_here(a) || !cuda::copy_row_major(at, work, stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  int64_t batch = batch_of(a);
  array ipiv = array::uninitialized({static_cast<int>(batch * k)}, int64);
  cuda::set_device_output(ipiv, stream());
  Info info(batch, stream());
  // A zero on U's diagonal is no error here (the factors are valid), as on
  // the CPU: the statuses are not read.
  cuda::cusolver::getrf(m, n, batch, a.dtype(),
                        cuda::device_ptr(work, stream()),
                        cuda::device_ptr<int64_t>(ipiv, stream()), info.ptr(),
                        stream());
  if (!cuda::copy_row_major(swapped_view(work), outputs[0], stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  cuda::set_device_output(outputs[1], stream());
  cuda::set_device_output(outputs[2], stream());
  cuda::Scratch order(sizeof(uint32_t) * static_cast<size_t>(batch * m),
                      stream());
  void* ipiv_ptr = ipiv.raw_data_ptr();
  void* pivots = outputs[1].raw_data_ptr();
  void* perm = outputs[2].raw_data_ptr();
  void* args[] = {&ipiv_ptr, &pivots, &perm, &order.ptr, &m, &k, &batch};
  cuda::launch(cuda::get_kernel(cuda::lu_pivots_kernel()), batch, 1, args,
               stream().index);
}

void QRF::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array at = swapped_view(a);
  array work = like(at); // a column-major: its transpose row-major
  if (!runs_here(a) || !cuda::copy_row_major(at, work, stream())) {
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
  fill(outputs[1], k, n, true, false, stream());
  // Q: the first k columns, formed in place.
  cuda::cusolver::orgqr(m, k, k, m * n, batch, a.dtype(),
                        cuda::device_ptr(work, stream()),
                        cuda::device_ptr(tau, stream()), info.ptr(), stream());
  Shape qs = work.shape();
  qs[qs.size() - 2] = static_cast<int>(k); // k columns of m
  if (!cuda::copy_row_major(swapped_view(view(work, qs, work.strides())),
                            outputs[0], stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
  }
}

void SVD::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  int64_t m = a.shape(-2), n = a.shape(-1);
  // cuSOLVER's gesvd needs rows >= columns: a wide matrix goes as it is
  // (its transpose, column-major: A^T = U' S V'^T, so U = V' and
  // V^T = U'^T, each the other's buffer read row-major); a tall one as a
  // transposed copy, its factors transposed back.
  bool wide = n >= m;
  array src = wide ? a : swapped_view(a);
  array work = like(src);
  if (!runs_here(a) || !cuda::copy_row_major(src, work, stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  int64_t rows = wide ? n : m, cols = wide ? m : n, batch = batch_of(a);
  array& sv = outputs[compute_uv_ ? 1 : 0];
  cuda::set_device_output(sv, stream());
  // The column-major factors of the matrix solved: for a wide one, U'
  // (n x n) read row-major is V^T and V'^T (m x m) is U.
  array u = sv, vt = sv;
  if (compute_uv_) {
    u = wide ? outputs[2] : like(outputs[0]);
    vt = wide ? outputs[0] : like(outputs[2]);
    cuda::set_device_output(u, stream());
    cuda::set_device_output(vt, stream());
  }
  Info info(batch, stream());
  cuda::cusolver::gesvd(compute_uv_, rows, cols, batch, a.dtype(),
                        cuda::device_ptr(work, stream()), sv.raw_data_ptr(),
                        compute_uv_ ? u.raw_data_ptr() : nullptr,
                        compute_uv_ ? vt.raw_data_ptr() : nullptr, info.ptr(),
                        stream());
  info.raise_first("linalg::svd",
                   [](int) { return "the SVD did not converge"; });
  if (compute_uv_ && !wide &&
      (!cuda::copy_row_major(swapped_view(u), outputs[0], stream()) ||
       !cuda::copy_row_major(swapped_view(vt), outputs[2], stream()))) {
    cuda::eval_on_cpu(*this, inputs, outputs);
  }
}

void Eig::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array at = swapped_view(a);
  array work = like(at); // a column-major: its transpose row-major
  if (!runs_here(a) || a.dtype() != float32 || !cuda::cusolver::has_geev() ||
      !cuda::copy_row_major(at, work, stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  int64_t n = a.shape(-1), batch = batch_of(a);
  cuda::set_device_output(outputs[0], stream());
  array vr = like(a);
  if (vectors_) cuda::set_device_output(vr, stream());
  Info info(batch, stream());
  cuda::cusolver::geev(vectors_, n, batch, cuda::device_ptr(work, stream()),
                       outputs[0].raw_data_ptr(),
                       vectors_ ? vr.raw_data_ptr() : nullptr, info.ptr(),
                       stream());
  info.raise_first(vectors_ ? "linalg::eig" : "linalg::eigvals",
                   [](int) { return "the QR algorithm did not converge"; });
  if (!vectors_) return;
  cuda::set_device_output(outputs[1], stream());
  int64_t total = static_cast<int64_t>(outputs[1].size());
  void* v = vr.raw_data_ptr();
  void* w = outputs[0].raw_data_ptr();
  void* out = outputs[1].raw_data_ptr();
  void* args[] = {&v, &w, &out, &n, &total};
  cuda::launch(cuda::get_kernel(cuda::eig_vectors_kernel()), total, 1, args,
               stream().index);
}

} // namespace kiln
