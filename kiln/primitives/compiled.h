// A fused region of elementwise primitives, made by compile's fuse stage.
// Its inputs are the region's external arrays; its outputs are the region's
// nodes that are used outside it. The backends generate one kernel for it.
#pragma once

#include <optional>
#include <string>

#include "kiln/core/primitive.h"

namespace kiln {

/** One node of a fused region. args refer to external inputs (a < 0 means
 *  input -a - 1) or to earlier nodes (a >= 0 is an index into ops). */
struct FusedOp {
  std::shared_ptr<Primitive> primitive;
  std::vector<int> args;
  Dtype dtype;
};

/** A scalar known when the region was traced: baked into the kernel's
 *  source as a literal (its bits, so no precision is lost). */
struct FusedConstant {
  Dtype dtype;
  uint64_t bits; // the value's bytes, zero-extended
};

class Compiled : public Primitive {
 public:
  Compiled(Stream s, std::vector<FusedOp> ops, std::vector<int> outputs,
           std::vector<std::optional<FusedConstant>> constants)
      : Primitive(s),
        ops_(std::move(ops)),
        outputs_(std::move(outputs)),
        constants_(std::move(constants)) {
    for (auto& op : ops_) name_ += op.primitive->name();
  }

  /** "Compiled" and the fused primitives' names in order, as MLX names
   *  its compiled regions (CompiledMultiplyAdd). */
  const char* name() const override { return name_.c_str(); }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_DECLARE_GRADS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool is_equivalent(const Primitive& other) const override;
  void print(std::ostream& os) const override;

  const std::vector<FusedOp>& ops() const { return ops_; }
  /** Index into ops() of each output. */
  const std::vector<int>& outputs() const { return outputs_; }
  /** Per external input: its value when it is a traced scalar constant. */
  const std::vector<std::optional<FusedConstant>>& constants() const {
    return constants_;
  }

  /** State a backend keeps with the region across calls (the GPU's compiled
   *  kernels per layout variant, so a repeated call builds no key or source).
   *  Only the backend that sets it reads it, under its own lock. */
  std::shared_ptr<void>& backend_cache() const { return backend_cache_; }

  /** Rebuild the region's outputs from basic ops on these inputs (used by
   *  the transformations). */
  std::vector<array> unfused(const std::vector<array>& inputs) const;
  /** The region's ops run one by one, each by its own eval on the region's
   *  device, for layouts and machines a backend's kernel generator cannot
   *  take (no compiler, too many dimensions): the region's nodes only, in
   *  order, with no evaluation of a graph. run_unfused returns them. */
  void eval_unfused(const std::vector<array>& inputs,
                    std::vector<array>& outputs) const;
  std::vector<array> run_unfused(const std::vector<array>& inputs) const;

 private:
  const std::vector<FusedOp> ops_;
  const std::vector<int> outputs_;
  const std::vector<std::optional<FusedConstant>> constants_;
  mutable std::shared_ptr<void> backend_cache_;
  std::string name_ = "Compiled";
};

} // namespace kiln
