// Fused primitives of kiln::fast. Each has a dedicated kernel and keeps an
// equivalent graph of basic ops, the fallback, from which transformations
// derive gradients and batching rules.
#pragma once

#include <functional>

#include "kiln/core/primitive.h"

namespace kiln::fast {

using Fallback = std::function<std::vector<array>(std::vector<array>)>;

/** A primitive whose meaning is given by its fallback on the same inputs.
 *  Its default transformation rules transform the fallback (floating inputs
 *  only; integer and bool inputs get zero gradients). */
class Custom : public Primitive {
 public:
  Custom(Stream s, Fallback fallback)
      : Primitive(s), fallback_(std::move(fallback)) {}
  const Fallback& fallback() const { return fallback_; }
  /** Evaluates the fallback graph on this primitive's stream into
   *  row-major outputs (an eval_cpu without a kernel of its own, and the
   *  GPU where its kernels do not apply). */
  void eval_fallback(const std::vector<array>& inputs,
                     std::vector<array>& outputs);
  KILN_DECLARE_GRADS

 protected:
  const Fallback fallback_;
};

/** What the two norms share: eps, the input's shape, and equivalence of the
 *  same class with the same eps. Both normalize over the last axis. */
class NormCustom : public Custom {
 public:
  NormCustom(Stream s, Fallback f, float eps)
      : Custom(s, std::move(f)), eps_(eps) {}
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override = 0;
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const NormCustom*>(&other);
    return o && typeid(*o) == typeid(*this) && o->eps_ == eps_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  float eps() const { return eps_; }

 protected:
  const float eps_;
};

/** Inputs: x (any shape), weight and bias (1-d over x's last axis, or 0-d
 *  when absent). */
class LayerNorm : public NormCustom {
 public:
  using NormCustom::NormCustom;
  const char* name() const override { return "LayerNorm"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_DECLARE_VJP
  KILN_DECLARE_VMAP
};

/** Inputs: x, weight (1-d over x's last axis, or 0-d when absent). */
class RMSNorm : public NormCustom {
 public:
  using NormCustom::NormCustom;
  const char* name() const override { return "RMSNorm"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_DECLARE_VJP
  KILN_DECLARE_VMAP
};

/** What the norms' fused backwards share. Inputs: x, weight (1-d over x's
 *  last axis, or 0-d when absent) and the cotangent g of the norm's output,
 *  all of the norm's dtype, g of x's shape. Outputs: dx (x's shape) and
 *  dweight (weight's shape; a 0-d weight gets the sum over all elements),
 *  row-major. A LayerNorm's bias gradient is sum(g) over rows, an ordinary
 *  reduction left to the vjp. Per row, with xhat the normalized x, rstd
 *  its scale and gw = g * w: dx = rstd * (gw - mean(gw) - xhat *
 *  mean(gw * xhat)) for LayerNorm (without the mean(gw) term for RMSNorm),
 *  dweight = sum over rows of g * xhat. The fallback is the vjp of the
 *  norm's fallback graph, so the backward's own transformations (second
 *  order, vmap, jvp) differentiate and batch that graph. */
class NormVjp : public Custom {
 public:
  NormVjp(Stream s, Fallback f, float eps)
      : Custom(s, std::move(f)), eps_(eps) {}
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const NormVjp*>(&other);
    return o && typeid(*o) == typeid(*this) && o->eps_ == eps_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape(), in[1].shape()};
  }
  float eps() const { return eps_; }
  virtual bool rms() const = 0;

 protected:
  const float eps_;
};

class LayerNormVjp : public NormVjp {
 public:
  using NormVjp::NormVjp;
  const char* name() const override { return "LayerNormVjp"; }
  bool rms() const override { return false; }
};

class RMSNormVjp : public NormVjp {
 public:
  using NormVjp::NormVjp;
  const char* name() const override { return "RMSNormVjp"; }
  bool rms() const override { return true; }
};

/** Inputs: x (B, ..., T, D), offset (int32, 0-d or (B,)), and optionally
 *  freqs (float32, (dims / 2,)) which replace base. Rotates the first dims
 *  features of each position t by angles (t + offset) * scale * 1 / freq. */
class RoPE : public Custom {
 public:
  RoPE(Stream s, Fallback f, int dims, bool traditional, float base,
       float scale)
      : Custom(s, std::move(f)),
        dims_(dims),
        traditional_(traditional),
        base_(base),
        scale_(scale) {}
  const char* name() const override { return "RoPE"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const RoPE*>(&other);
    return o && o->dims_ == dims_ && o->traditional_ == traditional_ &&
           o->base_ == base_ && o->scale_ == scale_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  int dims() const { return dims_; }
  bool traditional() const { return traditional_; }
  float base() const { return base_; }
  float scale() const { return scale_; }

 private:
  const int dims_;
  const bool traditional_;
  const float base_;
  const float scale_;
};

/** Inputs: q (B, Nq, Lq, D), k (B, Nkv, Lk, D), v (B, Nkv, Lk, Dv), then an
 *  optional mask broadcast to (B, Nq, Lq, Lk) (bool, or additive in the
 *  output dtype), then optional sinks (Nq,). Nq is a multiple of Nkv.
 *  With stats (made on the GPU under vjp where cuDNN runs the backward),
 *  a second output holds each query row's log-sum-exp of its scaled
 *  scores, float32 (B, Nq, Lq): the backward reads it and the output
 *  instead of recomputing the forward. */
class ScaledDotProductAttention : public Custom {
 public:
  ScaledDotProductAttention(Stream s, Fallback f, float scale, bool do_causal,
                            bool has_sinks, bool with_stats = false)
      : Custom(s, std::move(f)),
        scale_(scale),
        do_causal_(do_causal),
        has_sinks_(has_sinks),
        with_stats_(with_stats) {}
  const char* name() const override { return "ScaledDotProductAttention"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  KILN_DECLARE_VJP
  KILN_DECLARE_VMAP
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const ScaledDotProductAttention*>(&other);
    return o && o->scale_ == scale_ && o->do_causal_ == do_causal_ &&
           o->has_sinks_ == has_sinks_ && o->with_stats_ == with_stats_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    auto shape = in[0].shape();
    shape.back() = in[2].shape().back();
    if (!with_stats_) return {shape};
    return {shape, {in[0].shape(0), in[0].shape(1), in[0].shape(2)}};
  }
  float scale() const { return scale_; }
  /** Whether the GPU's fused kernels serve these inputs well (defined by
   *  the CUDA backend). When they do not, the op builds its fallback graph
   *  on the GPU instead: two matmuls and a softmax, which cuBLASLt runs
   *  far faster than a fused kernel without tensor cores. Under vjp the op
   *  also needs gpu_fused_backward_fits; under jvp it builds the graph. */
  static bool gpu_fused_fits(Dtype dt, int64_t q_len, int64_t head_dim,
                             int64_t v_head_dim, bool has_sinks);
  /** Whether the GPU's fused backward (ScaledDotProductAttentionVjp on
   *  tensor cores) computes the gradients of q, k and v for these inputs
   *  (defined by the CUDA backend). The op keeps the fused primitive under
   *  vjp only then; otherwise its vjp differentiates the fallback graph. */
  static bool gpu_fused_backward_fits(Dtype dt, int64_t head_dim,
                                      int64_t v_head_dim, bool has_sinks);
  /** Whether, under vjp on the GPU, the forward should keep its row
   *  statistics for the backward (defined by the CUDA backend: where cuDNN
   *  runs these shapes without a mask or sinks). */
  static bool gpu_keeps_stats(Dtype dt, int64_t q_len, int64_t k_len,
                              int64_t head_dim, int64_t v_head_dim,
                              bool causal);
  bool do_causal() const { return do_causal_; }
  bool has_sinks() const { return has_sinks_; }
  bool with_stats() const { return with_stats_; }

 private:
  const float scale_;
  const bool do_causal_;
  const bool has_sinks_;
  const bool with_stats_;
};

/** The gradients of ScaledDotProductAttention (no sinks) for q, k and v.
 *  Inputs: q, k, v, the cotangent of the forward's output, then the mask
 *  if any (as the forward's), then, when `saved`, the forward's output and
 *  its row statistics (a forward with stats). Outputs: dq, dk, dv,
 *  row-major, in the dtypes of q, k, v. Its fallback is the vjp of the
 * forward's fallback graph, so its own transformations differentiate and batch
 * that graph. The GPU computes it on tensor cores (flash attention 2's
 * backward, recomputing the forward's row statistics); the CPU evaluates the
 * fallback. */
class ScaledDotProductAttentionVjp : public Custom {
 public:
  ScaledDotProductAttentionVjp(Stream s, Fallback f, float scale,
                               bool do_causal, bool saved = false)
      : Custom(s, std::move(f)),
        scale_(scale),
        do_causal_(do_causal),
        saved_(saved) {}
  const char* name() const override { return "ScaledDotProductAttentionVjp"; }
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  KILN_GPU_EVAL
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const ScaledDotProductAttentionVjp*>(&other);
    return o && o->scale_ == scale_ && o->do_causal_ == do_causal_ &&
           o->saved_ == saved_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape(), in[1].shape(), in[2].shape()};
  }
  float scale() const { return scale_; }
  bool do_causal() const { return do_causal_; }
  bool saved() const { return saved_; }

 private:
  const float scale_;
  const bool do_causal_;
  const bool saved_;
};

} // namespace kiln::fast
