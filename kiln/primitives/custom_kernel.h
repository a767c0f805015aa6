// The primitive behind fast.cuda_kernel and fast.precompiled_cuda_kernel: a
// user's CUDA kernel with its launch shape. Graph logic only; the GPU
// backend compiles (or loads) and launches it (backend/cuda/custom_kernel.cpp).
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/core/primitive.h"
#include "kiln/ops/fast.h"

namespace kiln::fast {

/** Inputs: the kernel's inputs, then one array per output when outputs
 *  start from init_value (their initial values, broadcast). Outputs are
 *  row-major, of the shapes and dtypes the call gave. */
class CustomKernel : public Primitive {
 public:
  struct Spec {
    /** The kernel's function name; for a source kernel, also the cache key
     *  (it ends with a hash of the source). */
    std::string name;
    /** The generated CUDA source, or the precompiled PTX or cubin. */
    std::string source;
    bool precompiled = false;
    std::vector<CustomKernelShapeInfo> shape_infos;
    std::vector<ScalarArg> scalars;
    std::tuple<int, int, int> grid, threadgroup;
    int shared_memory = 0;
    bool init = false; // outputs start from the extra inputs
    bool ensure_row_contiguous = true;
    std::vector<Shape> output_shapes;
  };

  CustomKernel(Stream s, Spec spec) : Primitive(s), spec_(std::move(spec)) {}

  const char* name() const override { return "CustomKernel"; }
  const Spec& spec() const { return spec_; }

  /** Custom kernels are CUDA code: the CPU cannot run them. */
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_DECLARE_GRADS

  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return spec_.output_shapes;
  }
  bool is_equivalent(const Primitive& other) const override;
  void print(std::ostream& os) const override {
    os << "CustomKernel(" << spec_.name << ")";
  }

 private:
  Spec spec_;
};

} // namespace kiln::fast
