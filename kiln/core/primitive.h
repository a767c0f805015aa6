// The unit of extension: one small class per primitive. A primitive knows its
// outputs' shapes, its transformation rules and its name; eval_cpu and
// eval_gpu are declared here and defined in the backends.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/config.h"
#include "kiln/core/device.h"

// A primitive declares eval_gpu only when the CUDA backend is built, so that
// backend must define it for every primitive (the link checks completeness)
// and a CPU-only build needs no stubs.
#if KILN_HAS_CUDA
#define KILN_GPU_EVAL                                  \
  void eval_gpu(const std::vector<array>& inputs,      \
                std::vector<array>& outputs) override;
#define KILN_GPU_EVAL_UNARY \
  void eval_gpu(const std::vector<array>& inputs, array& out) override;
#define KILN_GPU_DECLINES \
  std::string gpu_declines(const std::vector<array>& inputs) const override;
#else
#define KILN_GPU_EVAL
#define KILN_GPU_EVAL_UNARY
#define KILN_GPU_DECLINES
#endif

// Declarations of the transformation rules (defined next to each family in
// primitives/<family>_grads.cpp).
#define KILN_DECLARE_VJP                                              \
  std::vector<array> vjp(const std::vector<array>& primals,           \
                         const std::vector<array>& cotangents,        \
                         const std::vector<int>& argnums,             \
                         const std::vector<array>& outputs) override;
#define KILN_DECLARE_JVP                                              \
  std::vector<array> jvp(const std::vector<array>& primals,           \
                         const std::vector<array>& tangents,          \
                         const std::vector<int>& argnums) override;
#define KILN_DECLARE_VMAP                                             \
  std::pair<std::vector<array>, std::vector<int>> vmap(               \
      const std::vector<array>& inputs, const std::vector<int>& axes) \
      override;
#define KILN_DECLARE_GRADS KILN_DECLARE_VJP KILN_DECLARE_JVP KILN_DECLARE_VMAP

namespace kiln {

/** How compile's fusion pass may treat a primitive. */
enum class FusionKind {
  none,      // not fusable
  unary,     // elementwise, one input
  binary,    // elementwise, two inputs
  ternary,   // elementwise, three inputs
  cast,      // astype
  broadcast, // broadcast_to: a view inside a region, never a region's end
};

class Primitive : public std::enable_shared_from_this<Primitive> {
 public:
  explicit Primitive(Stream stream) : stream_(stream) {}
  virtual ~Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;

  const Stream& stream() const { return stream_; }
  const Device& device() const { return stream_.device; }

  /** Compute outputs from evaluated inputs. Inputs may have any strides. */
  virtual void eval_cpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) = 0;
  /** Defined by the CUDA backend; a CPU-only build never reaches it. */
  virtual void eval_gpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs);

  /** Why the GPU has no kernel for these inputs (their dtypes, their
   *  shapes, a library that is not there), or empty when it has one. Ops
   *  ask when they build the graph and put the primitive on the CPU where
   *  the GPU declines (detail::placed in ops/utils.h), so the fallback is
   *  part of the graph. Primitives with such cases declare it with
   *  KILN_GPU_DECLINES; the CUDA backend defines it next to eval_gpu. */
  virtual std::string gpu_declines(const std::vector<array>& inputs) const {
    return {};
  }

  /** Forward-mode derivative of the outputs for tangents of the inputs in
   *  argnums (one tangent per argnum). */
  virtual std::vector<array> jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums);
  /** Reverse-mode: cotangents of the inputs in argnums. */
  virtual std::vector<array> vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs);
  /** Batched application: inputs with their batch axes (-1 for none);
   *  returns the outputs and their batch axes. */
  virtual std::pair<std::vector<array>, std::vector<int>> vmap(
      const std::vector<array>& inputs, const std::vector<int>& axes);

  /** Output shapes for new input shapes (compile's shapeless mode). */
  virtual std::vector<Shape> output_shapes(const std::vector<array>& inputs);

  /** Same computation with the same parameters (common-subexpression
   *  elimination merges equivalent nodes). */
  virtual bool is_equivalent(const Primitive& other) const { return false; }

  /** Inputs [0, n) carry gradients; later inputs (for example the traced
   *  outputs a custom function forwards) do not. */
  virtual int num_differentiable_inputs(int n_inputs) const { return n_inputs; }

  virtual const char* name() const = 0;
  virtual FusionKind fusion_kind() const { return FusionKind::none; }
  virtual void print(std::ostream& os) const { os << name(); }

 private:
  Stream stream_;
};

/** A primitive with exactly one output. */
class UnaryPrimitive : public Primitive {
 public:
  using Primitive::Primitive;
  virtual void eval_cpu(const std::vector<array>& inputs, array& out) = 0;
  virtual void eval_gpu(const std::vector<array>& inputs, array& out);

  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) final {
    eval_cpu(inputs, outputs[0]);
  }
  void eval_gpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) final {
    eval_gpu(inputs, outputs[0]);
  }
};

} // namespace kiln
