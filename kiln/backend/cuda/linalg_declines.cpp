// What the GPU's linear algebra declines, known from the dtype and whether
// cuSOLVER loads: the linalg ops ask as they build the graph and place such
// primitives on the CPU (detail::placed). Layouts the GPU cannot copy, and
// the shapes runs_here sends to the host, are only known when the graph
// runs; the eval_gpus still check them there.
#include <string>

#include "kiln/backend/cuda/cusolver.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

namespace {

// Every cuSOLVER-backed eval_gpu needs float32 or float64 and the library.
std::string cusolver_declines(const array& a) {
  if (!cuda::cusolver::available()) {
    return "linear algebra without cuSOLVER (not found)";
  }
  if (a.dtype() != float32 && a.dtype() != float64) {
    return dtype_name(a.dtype()) +
           " matrices (cuSOLVER's routines here take float32 and float64)";
  }
  return {};
}

} // namespace

// The primitives whose only graph-time condition is cuSOLVER's.
#define KILN_CUSOLVER_DECLINES(P)                                       \
  std::string P::gpu_declines(const std::vector<array>& inputs) const { \
    return cusolver_declines(inputs[0]);                                \
  }
KILN_CUSOLVER_DECLINES(Inverse)
KILN_CUSOLVER_DECLINES(Cholesky)
KILN_CUSOLVER_DECLINES(QRF)
KILN_CUSOLVER_DECLINES(SVD)
KILN_CUSOLVER_DECLINES(Solve)
KILN_CUSOLVER_DECLINES(TriangularInverse)
KILN_CUSOLVER_DECLINES(LUF)
KILN_CUSOLVER_DECLINES(Eigh)
#undef KILN_CUSOLVER_DECLINES

std::string Eig::gpu_declines(const std::vector<array>& inputs) const {
  if (inputs[0].dtype() != float32) {
    return dtype_name(inputs[0].dtype()) +
           " matrices (the GPU's eig takes float32)";
  }
  if (!cuda::cusolver::has_geev()) {
    return "eig without cuSOLVER's geev (CUDA 12.6 or later)";
  }
  return cusolver_declines(inputs[0]);
}

} // namespace kiln
