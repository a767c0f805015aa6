// Eigen-decompositions on the GPU through cuSOLVER (linalg.cpp says how
// row-major matrices meet it): Eigh by syevd, or for small matrices one
// Jacobi call over the batch; Eig by geev (float32), its real eigenvectors
// made complex by a kernel.
#include <algorithm>
#include <string>

#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/linalg.h"

namespace kiln {

using namespace cuda::dense;

void Eigh::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const array& a = inputs[0];
  // Small matrices take the Jacobi route even alone, so a matrix's
  // eigenvectors (their signs) do not depend on the batch it comes in
  // (vmap against a loop).
  bool batched = a.shape(-1) <= cuda::cusolver::syevj_batched_max_n;
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

void Eig::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& a = inputs[0];
  array work = a;
  if (a.dtype() != float32 || !cuda::cusolver::has_geev() ||
      !column_major_copy(a, work, stream())) {
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
