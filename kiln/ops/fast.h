// Fused ops for transformers, as mlx.core.fast: normalization over the last
// axis, rotary position embedding, scaled dot-product attention, the
// cross-entropy loss and the gated delta rule; and custom CUDA kernels.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::fast {

/** x * rsqrt(mean(x^2, -1) + eps) * weight, over the last axis. weight is
 *  1-d with x's last-axis size; the output dtype promotes x and weight. */
array rms_norm(const array& x, const std::optional<array>& weight, float eps,
               StreamOrDevice s = {});

/** (x - mean) * rsqrt(var + eps) * weight + bias over the last axis;
 *  weight and bias are optional 1-d arrays of x's last-axis size. */
array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps,
                 StreamOrDevice s = {});

/** Rotary position embedding of x (B, *, T, D): the first `dims` features of
 *  position t rotate by angles (offset + t) * scale / freq_i, where freq_i
 *  is base^(2i / dims) unless freqs (dims / 2 values) is given; exactly one
 *  of base and freqs has a value. traditional rotates consecutive pairs,
 *  otherwise the two halves of the first dims features pair up. offset is
 *  an int, or an integer array: a scalar or one offset per batch entry. */
array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, int offset,
           const std::optional<array>& freqs = std::nullopt,
           StreamOrDevice s = {});
array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, const array& offset,
           const std::optional<array>& freqs = std::nullopt,
           StreamOrDevice s = {});

/** softmax(scale * q @ k^T + mask) @ v, the softmax in float32 (or
 *  float64). q is (B, Nq, Lq, D), k (B, Nkv, Lk, D), v (B, Nkv, Lk, Dv),
 *  with Nq a multiple of Nkv (grouped-query attention; k and v are not
 *  repeated). mask_mode is "" (no mask, or mask_arr if given), "array" or
 *  "causal" (query i sees keys up to i + Lk - Lq). mask_arr broadcasts to
 *  (B, Nq, Lq, Lk): bool (false hides a key) or additive. sinks (Nq,) adds
 *  one extra logit per head to each softmax. The CPU always uses its fused
 *  kernel. On the GPU the op picks the fused kernel or the matmul graph,
 *  whichever serves the shapes better; under jvp, and under vjp where no
 *  fused backward covers the inputs, the graph (the fused primitive's
 *  gradient would rebuild it); force_fused = true takes the fused kernel
 *  whenever it supports the inputs. */
array scaled_dot_product_attention(const array& queries, const array& keys,
                                   const array& values, float scale,
                                   const std::string& mask_mode = "",
                                   std::optional<array> mask_arr = {},
                                   const std::optional<array>& sinks = {},
                                   bool force_fused = false,
                                   StreamOrDevice s = {});

/** logsumexp(logits, -1) - logits[..., target] in float32, of the shape of
 *  targets (integer class indices, logits' shape without its last axis).
 *  Reduces in the logits' dtype, as MLX's CPU path. Indices are not
 *  bounds-checked (as array indices elsewhere). */
array cross_entropy(const array& logits, const array& targets,
                    StreamOrDevice s = {});

/** The gated delta rule over time, as mlx.core.fast.gated_delta_update:
 *  q, k (B, T, Hk, Dk), v (B, T, Hv, Dv), gamma and beta (B, T, Hv), an
 *  optional state (B, Hv, Dv, Dk) (zero if absent) and an optional bool
 *  mask (B, T) whose false steps leave the state alone and output zero.
 *  Value head h reads key head h / (Hv / Hk). Per step:
 *  S = gamma S; S += outer(beta (v - S k), k); out = S q.
 *  Returns {out (B, T, Hv, Dv) in q's dtype, the final state in float32
 *  (float64 for float64 inputs)}. */
std::pair<array, array> gated_delta_update(
    const array& q, const array& k, const array& v, const array& gamma,
    const array& beta, const std::optional<array>& state = std::nullopt,
    const std::optional<array>& mask = std::nullopt, StreamOrDevice s = {});

/** A custom kernel's template argument: a type (`using name = type;` in the
 *  kernel), an int or a bool (`constexpr`). */
using TemplateArg = std::variant<int, bool, Dtype>;
using TemplateArgs = std::vector<std::pair<std::string, TemplateArg>>;

/** A custom kernel made by cuda_kernel: called with its inputs, its
 *  outputs' shapes and dtypes, the grid in threads (not blocks, as MLX's
 *  Metal and CUDA kernels count it) and the block shape, template arguments,
 *  an optional value every output starts from, and whether to print the
 *  generated source. Returns the outputs. */
using CustomKernelFunction = std::function<std::vector<array>(
    const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes, std::tuple<int, int, int> grid,
    std::tuple<int, int, int> threadgroup, const TemplateArgs& template_args,
    std::optional<float> init_value, bool verbose, StreamOrDevice s)>;

/** A custom CUDA kernel from the body of its function, as
 *  mlx.core.fast.cuda_kernel: the signature is generated from the inputs
 *  (`const T* name`, and `name_shape`, `name_strides`, `name_ndim` when the
 *  body uses them) and the outputs (`T* name`); `header` goes before the
 *  function. NVRTC compiles it at its first evaluation (cached in memory and
 *  on disk like kiln's own kernels). GPU only; it has no gradient or
 *  batching rule (wrap it in custom_function for those). */
CustomKernelFunction cuda_kernel(const std::string& name,
                                 const std::vector<std::string>& input_names,
                                 const std::vector<std::string>& output_names,
                                 const std::string& source,
                                 const std::string& header = "",
                                 bool ensure_row_contiguous = true,
                                 int shared_memory = 0);

/** A scalar argument of a precompiled kernel, passed by value after the
 *  outputs. */
using ScalarArg = std::variant<bool, int, float>;

/** Runs the kernel `name` of a precompiled module (PTX text or a cubin), as
 *  mlx.core.fast.precompiled_cuda_kernel: its parameters are the inputs'
 *  pointers, the outputs' pointers, then the scalars. */
std::vector<array> precompiled_cuda_kernel(
    const std::string& name, const std::string& compiled_source,
    const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes,
    const std::vector<ScalarArg>& scalars, std::tuple<int, int, int> grid,
    std::tuple<int, int, int> threadgroup, int shared_memory = 0,
    std::optional<float> init_value = std::nullopt,
    bool ensure_row_contiguous = false, StreamOrDevice s = {});

/** Which of an input's shape, strides and ndim a kernel body uses. */
struct CustomKernelShapeInfo {
  bool shape = false, strides = false, ndim = false;
};

} // namespace kiln::fast
