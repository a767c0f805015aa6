// Triangular inverses and LU on the GPU through cuSOLVER (linalg.cpp says
// how row-major matrices meet it); LU's pivots and row order come from a
// kernel over getrf's.
#include <algorithm>
#include <string>

#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/linalg.h"

namespace kiln {

using namespace cuda::dense;

void TriangularInverse::eval_gpu(const std::vector<array>& inputs,
                                 array& out) {
  auto why = [](int v) {
    return "the matrix is singular (its diagonal entry " +
           std::to_string(v - 1) + " is zero)";
  };
  triangle_routine(*this, inputs, out, upper_, false, cuda::cusolver::trtri,
                   false, "linalg::tri_inv", why);
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

} // namespace kiln
