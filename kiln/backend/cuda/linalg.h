// The kernels around cuSOLVER's factorizations (device/linalg.cuh), compiled
// by NVRTC at first use in both builds.
#pragma once

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** gKeepTriangle{dtype} or, with identity, gIdentity{dtype}; each compiles
 *  with the other. */
JitKernel linalg_fill_kernel(Dtype dt, bool identity);
/** gLuPivots: getrf's int64 pivots as kiln's pivots and row order. */
JitKernel lu_pivots_kernel();
/** gEigVectorsfloat32: geev's real eigenvectors as complex64 ones. */
JitKernel eig_vectors_kernel();
/** gSmallSolve{dtype}: batches of small systems solved whole. */
JitKernel small_solve_kernel(Dtype dt);

} // namespace kiln::cuda
