// Names and instantiations of the kernels that create data from parameters:
// vArange{dtype} (device/creation.cuh) and vRandomBits (device/random.cuh).
#pragma once

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

JitKernel arange_kernel(Dtype dt);
JitKernel random_bits_kernel();

} // namespace kiln::cuda
