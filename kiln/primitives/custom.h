// A function with user-defined transformation rules. Its inputs are the
// function's inputs followed by the function's own (traced) outputs, which it
// forwards; gradients reach only the real inputs.
#pragma once

#include "kiln/core/primitive.h"
#include "kiln/primitives/view_eval.h"
#include "kiln/transforms/autograd.h"

namespace kiln {

class CustomTransforms : public Primitive {
 public:
  CustomTransforms(Stream s, int num_outputs, Fn fun, std::optional<VjpFn> vjp,
                   std::optional<JvpFn> jvp, std::optional<VmapFn> vmap)
      : Primitive(s),
        num_outputs_(num_outputs),
        fun_(std::move(fun)),
        vjp_fn_(std::move(vjp)),
        jvp_fn_(std::move(jvp)),
        vmap_fn_(std::move(vmap)) {}
  const char* name() const override { return "CustomTransforms"; }
  KILN_VIEW_EVAL
  KILN_DECLARE_GRADS
  int num_differentiable_inputs(int n_inputs) const override {
    return n_inputs - num_outputs_;
  }

 private:
  const int num_outputs_;
  const Fn fun_;
  const std::optional<VjpFn> vjp_fn_;
  const std::optional<JvpFn> jvp_fn_;
  const std::optional<VmapFn> vmap_fn_;
};

/** Its outputs are its first num_outputs inputs (sharing their buffers);
 *  the remaining inputs are only evaluated first. Gradients flow to the
 *  forwarded inputs alone. */
class Depends : public Primitive {
 public:
  Depends(Stream s, int num_outputs)
      : Primitive(s), num_outputs_(num_outputs) {}
  const char* name() const override { return "Depends"; }
  KILN_VIEW_EVAL
  KILN_DECLARE_GRADS
  int num_differentiable_inputs(int) const override { return num_outputs_; }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  const int num_outputs_;
};

} // namespace kiln
