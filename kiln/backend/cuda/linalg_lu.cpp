// Triangular inverses (large ones by cuBLAS's trsm) and LU on the GPU
// through cuSOLVER (linalg.cpp says
// how row-major matrices meet it); LU's pivots and row order come from a
// kernel over getrf's.
#include <algorithm>
#include <string>

#include "kiln/backend/cuda/cublas.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/linalg.h"

namespace kiln {

using namespace cuda::dense;

// cuSOLVER's trtri takes 8.4 ms at order 4096 (float32, H200) where a
// cuBLAS trsm against the identity (PyTorch's solve_triangular) takes 3.5:
// large matrices take trsm, their zero diagonals found by a kernel first
// (trsm would give infinities). The buffer read column-major is A^T,
// triangular the other way: A^T Y = I gives Y = A^-T, read row-major A^-1.
void TriangularInverse::eval_gpu(const std::vector<array>& inputs,
                                 array& out) {
  const array& a = inputs[0];
  int64_t n = a.shape(-1), batch = batch_of(a);
  constexpr int64_t trsm_min_order = 128;
  if (n <= trsm_min_order || !cuda::cublas::available()) {
    triangle_routine(*this, inputs, out, upper_, false, cuda::cusolver::trtri,
                     false, "linalg::tri_inv", zero_diagonal_reason);
    return;
  }
  array work = like(a);
  if (!runs_here(a) || !cuda::copy_row_major(a, work, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  Info info(batch, stream());
  void* ap = cuda::device_ptr(work, stream());
  int* ip = info.ptr();
  void* args[] = {&ap, &n, &batch, &ip};
  constexpr int threads = 128; // a warp per matrix
  cuda::launch_blocks(cuda::get_kernel(cuda::zero_diagonal_kernel(a.dtype())),
                      (batch + threads / 32 - 1) / (threads / 32), threads,
                      args, stream().index);
  info.raise_first("linalg::tri_inv", zero_diagonal_reason);
  cuda::set_device_output(out, stream());
  fill_matrices(out, n, n, false, true, stream());
  cuda::cublas::trsm(!upper_, n, n, batch, a.dtype(), ap, out.raw_data_ptr(),
                     stream());
  fill_matrices(out, n, n, upper_, false, stream());
}

// Batches of small square matrices go to cuBLAS's batched getrf, one call
// over them all (as PyTorch's batched LU), instead of a cuSOLVER call per
// matrix or the host's LAPACK.
void LUF::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  int64_t batch = batch_of(a);
  constexpr int64_t batched_max_order = 64;
  bool batched = m == n && n <= batched_max_order && batch > 1 &&
                 batch <= INT32_MAX && cuda::cublas::available();
  array work = a;
  if (!column_major_copy(a, work, stream(), batched)) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  Dtype index = batched ? int32 : int64;
  array ipiv = array::uninitialized({static_cast<int>(batch * k)}, index);
  cuda::set_device_output(ipiv, stream());
  Info info(batch, stream());
  // A zero on U's diagonal is no error here (the factors are valid), as on
  // the CPU: the statuses are not read.
  void* w = cuda::device_ptr(work, stream());
  if (batched) {
    cuda::cublas::getrf_batched(n, batch, a.dtype(), w,
                                static_cast<int*>(ipiv.raw_data_ptr()),
                                info.ptr(), stream());
  } else {
    cuda::cusolver::getrf(m, n, batch, a.dtype(), w,
                          static_cast<int64_t*>(ipiv.raw_data_ptr()),
                          info.ptr(), stream());
  }
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
  cuda::launch(cuda::get_kernel(cuda::lu_pivots_kernel(index)), batch, 1, args,
               stream().index);
}

} // namespace kiln
