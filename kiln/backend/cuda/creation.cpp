// eval_gpu of Arange: one kernel per dtype (device/creation.cuh).
#include "kiln/backend/cuda/creation.h"

#include <stdexcept>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/primitives/creation.h"

namespace kiln::cuda {

JitKernel arange_kernel(Dtype dt) {
  return {"vArange" + dtype_name(dt),
          "#include \"kiln/backend/cuda/device/creation.cuh\"\n",
          std::string("kiln::cuda::arange<") + device_type(dt) + ">",
          {}};
}

} // namespace kiln::cuda

namespace kiln {

void Arange::eval_gpu(const std::vector<array>& inputs, array& out) {
  // arange makes complex ranges real and casts them (ops/creation.cpp).
  if (!cuda::gpu_supports(out.dtype())) {
    throw std::logic_error("[Arange] no GPU kernel for " +
                           dtype_name(out.dtype()) + " ranges.");
  }
  cuda::set_device_output(out, stream());
  int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) return;
  double start = start_, step = step_;
  void* ptr = out.raw_data_ptr();
  void* args[] = {&ptr, &n, &start, &step};
  cuda::launch(cuda::get_kernel(cuda::arange_kernel(out.dtype())), n, 1, args,
               stream().index);
}

} // namespace kiln
