// qqmm and gather_qqmm, as MLX's: matrix products whose both operands go
// through a microscaling mode (nvfp4 or mxfp8) first, the activations
// quantized on the fly, the weight as given when quantized. Built from
// quantize_fp / dequantize_fp and matmul, so they run on every device: the
// product of the dequantized values is taken in float32 (exact for nvfp4's
// codes and scales) and returned in x's dtype. qqmm's gradients quantize
// their products too, as MLX's: dx = qqmm(g, w.T), dw = qqmm(g.T, x.T)
// (where MLX needs N and x's rows in whole groups, these pad them with
// zeros).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/quantized.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/transforms/autograd.h"

namespace kiln {

namespace {

struct QqMode {
  int group_size;
  int bits;
  std::string mode;
};

QqMode qq_mode(const char* op, const std::string& mode,
               std::optional<int> group_size, std::optional<int> bits) {
  QqMode m{0, 0, mode};
  if (mode == "nvfp4") {
    m.group_size = 16, m.bits = 4;
  } else if (mode == "mxfp8") {
    m.group_size = 32, m.bits = 8;
  } else {
    throw std::invalid_argument(
        std::string("[") + op + "] Only 'nvfp4' and 'mxfp8' quantization "
        "modes are supported but got '" + mode + "'.");
  }
  if (group_size.value_or(m.group_size) != m.group_size ||
      bits.value_or(m.bits) != m.bits) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + mode + " needs group_size " +
        std::to_string(m.group_size) + " and bits " +
        std::to_string(m.bits) + "; got group_size " +
        std::to_string(group_size.value_or(m.group_size)) + " and bits " +
        std::to_string(bits.value_or(m.bits)) + ".");
  }
  return m;
}

bool float_type(Dtype dt) {
  return dt == float32 || dt == float16 || dt == bfloat16;
}

// a's values after quantization along its last axis, in float32.
array through(const array& a, const QqMode& m,
              const std::optional<array>& global_scale, StreamOrDevice s) {
  auto [codes, scales] =
      quantize_fp(a, m.group_size, m.bits, m.mode, global_scale, s);
  return dequantize_fp(codes, scales, m.group_size, m.bits, m.mode, float32,
                       global_scale, s);
}

// The checks both ops share: x's and w's types, the inner dimension K
// (a multiple of the group size), scales with a quantized w, global scales
// both or neither. Returns K.
int64_t check_operands(const char* op, const QqMode& m, const array& x,
                       const array& w, const std::optional<array>& scales,
                       const std::optional<array>& gsx,
                       const std::optional<array>& gsw, int w_ndim) {
  if (!float_type(x.dtype()) || x.ndim() < 2) {
    throw std::invalid_argument(
        std::string("[") + op + "] x must be float32, float16 or bfloat16 "
        "with at least 2 dimensions (..., K); got " + detail::describe(x) +
        ".");
  }
  const bool quantized = w.dtype() == uint32;
  if (quantized != scales.has_value()) {
    throw std::invalid_argument(
        std::string("[") + op + "] " +
        (quantized ? "scales must be given with a quantized (uint32) w"
                   : "scales are only for a quantized (uint32) w") +
        "; got w " + detail::describe(w) + ".");
  }
  if ((!quantized && !float_type(w.dtype())) ||
      static_cast<int>(w.ndim()) != w_ndim) {
    throw std::invalid_argument(
        std::string("[") + op + "] w must be " +
        (w_ndim == 2 ? "a matrix (N, K)" : "a batch of matrices (..., N, K)") +
        " of float32, float16 or bfloat16, or its uint32 codes; got " +
        detail::describe(w) + ".");
  }
  int64_t k = x.shape(-1);
  int64_t wk = quantized ? int64_t(w.shape(-1)) * 32 / m.bits : w.shape(-1);
  if (k != wk || k % m.group_size != 0) {
    throw std::invalid_argument(
        std::string("[") + op + "] x's last axis K = " + std::to_string(k) +
        " must match w's (" + std::to_string(wk) + " values) and be a " +
        "multiple of the group size " + std::to_string(m.group_size) +
        "; got x " + detail::describe(x) + " and w " + detail::describe(w) +
        ".");
  }
  if (gsx.has_value() != gsw.has_value()) {
    throw std::invalid_argument(
        std::string("[") + op + "] nvfp4 takes both global scales "
        "(global_scale_x and global_scale_w) or neither.");
  }
  return k;
}

// a with zeros appended along its last axis up to a multiple of the
// group size: the gradients quantize along N and along x's rows, which
// need not split into groups; zeros add nothing to the products, and a
// last group partly of zeros is scaled by its own values.
array pad_to_groups(const array& a, const QqMode& m, StreamOrDevice s) {
  int len = a.shape(-1), extra = (m.group_size - len % m.group_size) %
                                 m.group_size;
  if (extra == 0) return a;
  return pad(a, {static_cast<int>(a.ndim()) - 1}, {0}, {extra},
             array(0, a.dtype()), "constant", s);
}

} // namespace

array qqmm(const array& x, const array& w, const std::optional<array>& scales,
           std::optional<int> group_size, std::optional<int> bits,
           const std::string& mode, const std::optional<array>& global_scale_x,
           const std::optional<array>& global_scale_w, StreamOrDevice s) {
  QqMode m = qq_mode("qqmm", mode, group_size, bits);
  check_operands("qqmm", m, x, w, scales, global_scale_x, global_scale_w, 2);
  const bool quantized = w.dtype() == uint32;
  auto weight = [=](const std::vector<array>& in) {
    return quantized ? dequantize_fp(in[1], in[2], m.group_size, m.bits,
                                     m.mode, float32, global_scale_w, s)
                     : through(in[1], m, global_scale_w, s);
  };
  auto forward = [=](const std::vector<array>& in) {
    array xq = through(in[0], m, global_scale_x, s);
    // A quantized w is read as quantized_matmul reads it (on the CPU, the
    // codes themselves for a few rows of x).
    array y = quantized && !global_scale_w
                  ? quantized_matmul_fp(xq, in[1], in[2], true, m.group_size,
                                        m.bits, m.mode, s)
                  : matmul(xq, transpose(weight(in), s), s);
    return std::vector<array>{astype(y, in[0].dtype(), s)};
  };
  // The input's gradient g @ w through the mode along N; the weight's
  // g.T @ x along the M rows of x. A quantized w gets none (its codes are
  // integers), and its values are read dequantized for the input's.
  auto vjp = [=](const std::vector<array>& primals,
                 const std::vector<array>& cotangents,
                 const std::vector<array>&) {
    const array &xs = primals[0], &g = cotangents[0];
    const int n = g.shape(-1), k = xs.shape(-1);
    array wf = quantized ? weight(primals) : primals[1];
    std::vector<array> grads = {
        qqmm(pad_to_groups(g, m, s), pad_to_groups(swapaxes(wf, 0, 1, s), m, s),
             std::nullopt, m.group_size, m.bits, m.mode, std::nullopt,
             std::nullopt, s)};
    if (quantized) {
      grads.push_back(zeros_like(primals[1], s));
      grads.push_back(zeros_like(primals[2], s));
      return grads;
    }
    array gt = pad_to_groups(swapaxes(reshape(g, {-1, n}, s), 0, 1, s), m, s);
    array xt = pad_to_groups(swapaxes(reshape(xs, {-1, k}, s), 0, 1, s), m, s);
    grads.push_back(astype(qqmm(gt, xt, std::nullopt, m.group_size, m.bits,
                                m.mode, std::nullopt, std::nullopt, s),
                           primals[1].dtype(), s));
    return grads;
  };
  // Tangents: the same product with each tangent in its operand's place.
  auto jvp = [=](const std::vector<array>& primals,
                 const std::vector<array>& tangents,
                 const std::vector<int>& argnums) {
    std::optional<array> out;
    for (size_t i = 0; i < argnums.size(); ++i) {
      if (argnums[i] > 1 || (argnums[i] == 1 && quantized)) continue;
      std::vector<array> in = primals;
      in[argnums[i]] = tangents[i];
      array t = forward(in)[0];
      out = out ? add(*out, t, s) : t;
    }
    return std::vector<array>{out ? *out : zeros_like(forward(primals)[0], s)};
  };
  std::vector<array> inputs = {x, w};
  if (quantized) inputs.push_back(*scales);
  return custom_function(forward, vjp, jvp)(inputs)[0];
}

array gather_qqmm(const array& x, const array& w,
                  const std::optional<array>& scales,
                  std::optional<array> lhs_indices,
                  std::optional<array> rhs_indices,
                  std::optional<int> group_size, std::optional<int> bits,
                  const std::string& mode,
                  const std::optional<array>& global_scale_x,
                  const std::optional<array>& global_scale_w,
                  bool sorted_indices, StreamOrDevice s) {
  QqMode m = qq_mode("gather_qqmm", mode, group_size, bits);
  check_operands("gather_qqmm", m, x, w, scales, global_scale_x,
                 global_scale_w, std::max<int>(w.ndim(), 2));
  const bool quantized = w.dtype() == uint32;
  auto forward = [=](const std::vector<array>& in) {
    array wd = quantized ? dequantize_fp(in[1], in[2], m.group_size, m.bits,
                                         m.mode, float32, global_scale_w, s)
                         : through(in[1], m, global_scale_w, s);
    array y = gather_mm(through(in[0], m, global_scale_x, s),
                        swapaxes(wd, -1, -2, s), lhs_indices, rhs_indices,
                        sorted_indices, s);
    return std::vector<array>{astype(y, in[0].dtype(), s)};
  };
  // The operands' rounding has no derivative; gradients through the
  // gather are not defined yet (qqmm's are), so they raise rather than
  // come out as zeros.
  auto vjp = [](const std::vector<array>&, const std::vector<array>&,
                const std::vector<array>&) -> std::vector<array> {
    throw std::invalid_argument(
        "[gather_qqmm] gradients are not implemented; qqmm per matrix has "
        "them.");
  };
  std::vector<array> inputs = {x, w};
  if (quantized) inputs.push_back(*scales);
  return custom_function(forward, vjp,
                         [vjp](const std::vector<array>&,
                               const std::vector<array>&,
                               const std::vector<int>&) -> std::vector<array> {
                           return vjp({}, {}, {});
                         })(inputs)[0];
}

} // namespace kiln
