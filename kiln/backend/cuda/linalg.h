// The kernels around cuSOLVER's factorizations (device/linalg.cuh),
// compiled by NVRTC at first use in both builds, and the helpers the linear
// algebra eval_gpus share (linalg*.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cusolver.h"
#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/array.h"
#include "kiln/core/dtype.h"
#include "kiln/primitives/linalg.h"

namespace kiln::cuda {

/** gKeepTriangle{dtype} or, with identity, gIdentity{dtype}; each compiles
 *  with the other. */
JitKernel linalg_fill_kernel(Dtype dt, bool identity);
/** gLuPivots{int64|int32}: getrf's pivots (cuSOLVER's int64 or cuBLAS's
 *  int32) as kiln's pivots and row order. */
JitKernel lu_pivots_kernel(Dtype index);
/** gEigVectorsfloat32: geev's real eigenvectors as complex64 ones. */
JitKernel eig_vectors_kernel();
/** gSmallSolve{dtype}: batches of small systems solved whole. */
JitKernel small_solve_kernel(Dtype dt);
/** gZeroDiagonal{dtype}: each matrix's first zero diagonal entry. */
JitKernel zero_diagonal_kernel(Dtype dt);

namespace dense {

/** Over the row-major rows x cols matrices of a: zero what lies outside
 *  the lower (or upper) triangle, or with identity write identities. */
void fill_matrices(array& a, int64_t rows, int64_t cols, bool upper,
                   bool identity, const Stream& s);
/** How many matrices a holds over its last two axes. */
int64_t batch_of(const array& a);
/** A view of a's buffer with this shape and these strides (no copy). */
array strided_view(const array& a, Shape shape, const Strides& strides);
/** The view of a with its last two axes swapped, its first `rows` rows
 *  (all when negative). */
array swapped_view(const array& a, int64_t rows = -1);
/** A fresh array for a row-major copy of x (copy_row_major fills it). */
array like(const array& x);
/** work = a's matrices column-major (a row-major copy of their transposes,
 *  as LU, QR and Eig take them), when cuSOLVER takes a (runs_here, with
 *  `batched` as there) and the GPU can copy it; false otherwise, with work
 *  unset. */
bool column_major_copy(const array& a, array& work, const Stream& s,
                       bool batched = false);
/** Whether cuSOLVER takes a's matrices. Its routines take one matrix per
 *  call (a few kernels and a host round of their own each), so a batch of
 *  many small matrices stays on the host's LAPACK, which is faster there
 *  (its transfers included) than hundreds of calls; `batched` for a
 *  routine that takes a whole batch. */
bool runs_here(const array& a, bool batched = false);

/** potrf or trtri: the routine over matrices in the triangle named
 *  (column-major), in place. */
using TriangleRoutine = void (*)(bool upper, int64_t n, int64_t batch,
                                 Dtype dt, void* a, int* info,
                                 const Stream& s);
/** Cholesky and tri_inv: routine over a copy of inputs[0]'s matrices in
 *  the column-major triangle that holds the row-major one named (the lower
 *  one of large matrices when `lower_faster`), a failure raised as op's
 *  with why(status), the other triangle of out zeroed; `batched` as
 *  runs_here's. */
void triangle_routine(UnaryPrimitive& p, const std::vector<array>& inputs,
                      array& out, bool upper, bool batched,
                      TriangleRoutine routine, bool lower_faster,
                      const char* op, std::string (*why)(int));

/** Device ints for a batch's statuses. */
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
  /** Whether any matrix's status is positive (waits for the stream). */
  bool any_positive() {
    auto v = cusolver::read_info(ptr(), batch_, stream_);
    return std::any_of(v.begin(), v.end(), [](int x) { return x > 0; });
  }
  /** Raises linalg_failure(op, i, ...) for the first matrix i whose status
   *  is positive, with what(status) as the reason. */
  template <typename What>
  void raise_first(const char* op, What&& what) {
    auto v = cusolver::read_info(ptr(), batch_, stream_);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] > 0) linalg_failure(op, i, v.size(), what(v[i]));
    }
  }

 private:
  Scratch scratch_;
  int64_t batch_;
  Stream stream_;
};

} // namespace dense

} // namespace kiln::cuda
