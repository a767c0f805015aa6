// kiln.core.fast: fused normalization, rotary embedding and attention.
#include "kiln_py.h"

namespace kiln::py {

namespace {
std::optional<array> opt_array(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_array(h);
}
} // namespace

void init_fast(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("fast", "Fused ops for transformers.");
  m.def(
      "rms_norm",
      [](ArrayLike x, ArrayLike weight, float eps, const StreamArg& s) {
        return fast::rms_norm(to_array(x), opt_array(weight), eps, to_sod(s));
      },
      "x"_a, "weight"_a.none(), "eps"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Root-mean-square normalization.");
  m.def(
      "layer_norm",
      [](ArrayLike x, ArrayLike weight, nb::handle bias, float eps,
         const StreamArg& s) {
        return fast::layer_norm(to_array(x), opt_array(weight), opt_array(bias),
                                eps, to_sod(s));
      },
      "x"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a, nb::kw_only(),
      "stream"_a = nb::none(), "Layer normalization over the last axis.");
  m.def(
      "rope",
      [](ArrayLike a, int dims, bool traditional, std::optional<float> base,
         float scale, nb::handle offset, nb::handle freqs, const StreamArg& s) {
        array x = to_array(a);
        if (PyLong_Check(offset.ptr())) {
          return fast::rope(x, dims, traditional, base, scale,
                            cast_arg<int>(offset, "rope", "offset"),
                            opt_array(freqs), to_sod(s));
        }
        return fast::rope(x, dims, traditional, base, scale, to_array(offset),
                          opt_array(freqs), to_sod(s));
      },
      "a"_a, "dims"_a, nb::kw_only(), "traditional"_a, "base"_a.none(),
      "scale"_a, "offset"_a, "freqs"_a = nb::none(), "stream"_a = nb::none(),
      "Rotary position embedding.");
  m.def(
      "scaled_dot_product_attention",
      [](ArrayLike q, ArrayLike k, ArrayLike v, float scale, nb::handle mask,
         nb::handle sinks, bool force_fused, const StreamArg& s) {
        std::string mode;
        std::optional<array> mask_arr;
        if (PyUnicode_Check(mask.ptr())) {
          mode = nb::cast<std::string>(mask);
        } else if (!mask.is_none()) {
          mode = "array";
          mask_arr = to_array(mask);
        }
        return fast::scaled_dot_product_attention(
            to_array(q), to_array(k), to_array(v), scale, mode, mask_arr,
            opt_array(sinks), force_fused, to_sod(s));
      },
      "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a, "mask"_a = nb::none(),
      "sinks"_a = nb::none(), "force_fused"_a = false, "stream"_a = nb::none(),
      "softmax(scale * q @ k^T + mask) @ v.");
  m.def(
      "cross_entropy",
      [](ArrayLike logits, ArrayLike targets, const StreamArg& s) {
        return fast::cross_entropy(to_array(logits), to_array(targets),
                                   to_sod(s));
      },
      "logits"_a, "targets"_a, nb::kw_only(), "stream"_a = nb::none(),
      "logsumexp(logits, -1) - logits[..., targets], in float32.");
  m.def(
      "gated_delta_update",
      [](ArrayLike q, ArrayLike k, ArrayLike v, ArrayLike gamma, ArrayLike beta,
         nb::handle initial_state, nb::handle mask, const StreamArg& s) {
        auto [out, state] = fast::gated_delta_update(
            to_array(q), to_array(k), to_array(v), to_array(gamma),
            to_array(beta), opt_array(initial_state), opt_array(mask),
            to_sod(s));
        nb::list l;
        l.append(out);
        l.append(state);
        return l;
      },
      "q"_a, "k"_a, "v"_a, "gamma"_a, "beta"_a, "initial_state"_a = nb::none(),
      "mask"_a = nb::none(), "stream"_a = nb::none(),
      "The gated delta rule over time: [output, final state].");
}

} // namespace kiln::py
