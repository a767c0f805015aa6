// eval_gpu of the random family: RandomBits gives the CPU's Threefry bits,
// bit for bit (device/random.cuh); Float32Erf is elementwise (its functors
// are in device/unary_ops.cuh).
#include "kiln/backend/cuda/creation.h"

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/primitives/random.h"

namespace kiln::cuda {

JitKernel random_bits_kernel() {
  return {"vRandomBits", "#include \"kiln/backend/cuda/device/random.cuh\"\n",
          "kiln::cuda::random_bits<0>", {}};
}

} // namespace kiln::cuda

namespace kiln {

// Several keys (shape (..., 2), from vmap over keys) each fill an equal,
// consecutive share of the output as if drawn alone.
void RandomBits::eval_gpu(const std::vector<array>& inputs, array& out) {
  array keys = inputs[0];
  if (!keys.flags().row_contiguous) {
    auto tmp = array::uninitialized(keys.shape(), keys.dtype());
    if (!cuda::copy_row_major(keys, tmp, stream())) {
      cuda::eval_on_cpu(*this, inputs, out);
      return;
    }
    keys = tmp;
  }
  cuda::set_device_output(out, stream());
  int64_t nbytes = static_cast<int64_t>(out.nbytes());
  int64_t num_keys = static_cast<int64_t>(keys.size() / 2);
  if (nbytes == 0 || num_keys == 0) return;
  int64_t per_key = nbytes / num_keys;
  int64_t words = (per_key + 3) / 4;
  int64_t items = num_keys * (words / 2 + words % 2);
  void* key_ptr = cuda::device_ptr(keys, stream());
  void* out_ptr = out.raw_data_ptr();
  void* args[] = {&key_ptr, &out_ptr, &num_keys, &per_key};
  cuda::launch(cuda::get_kernel(cuda::random_bits_kernel()), items, 1, args,
               stream().index);
}

void Float32Erf::eval_gpu(const std::vector<array>& inputs, array& out) {
  // Other dtypes raise on the CPU, as they should.
  if (!is_floating_point(inputs[0].dtype()) ||
      !cuda::elementwise(inverse_ ? "Float32ErfInv" : "Float32Erf", inputs,
                         out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

} // namespace kiln
