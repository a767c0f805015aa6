// Quantized weights (the affine and microscaling modes): quantize,
// dequantize, quantized_matmul, gather_qmm; products of two quantized
// operands (qqmm, gather_qqmm); the fp8 (e4m3) conversions.
#include "kiln_py.h"

namespace kiln::py {

namespace {

bool microscaling(const std::string& mode) { return mode != "affine"; }

// MLX's None defaults: groups of 64 and 4 bits in the affine mode; 32 and
// 4 (mxfp4), 32 and 8 (mxfp8), 16 and 4 (nvfp4).
int group_of(std::optional<int> g, const std::string& mode = "affine") {
  return g.value_or(mode == "affine" ? 64 : mode == "nvfp4" ? 16 : 32);
}
int bits_of(std::optional<int> b, const std::string& mode = "affine") {
  return b.value_or(mode == "mxfp8" ? 8 : 4);
}

void no_biases(nb::handle biases, const char* op, const std::string& mode) {
  if (!biases.is_none()) {
    throw nb::value_error((std::string("[") + op + "] the " + mode +
                           " mode has no biases.")
                              .c_str());
  }
}

array biases_of(nb::handle biases, const char* op) {
  if (biases.is_none()) {
    throw nb::value_error(
        (std::string("[") + op +
         "] the affine mode needs biases (from quantize).")
            .c_str());
  }
  return to_array(biases);
}

// nvfp4's second-level scale, where given; other modes have none (as
// MLX's error says).
std::optional<array> global_scale_of(nb::handle global_scale, const char* op,
                                     const std::string& mode) {
  if (global_scale.is_none()) return std::nullopt;
  if (mode != "nvfp4") {
    throw nb::value_error((std::string("[") + op +
                           "] a global scale is only supported in the nvfp4 "
                           "mode; got mode '" + mode + "'.")
                              .c_str());
  }
  return opt_array(global_scale);
}

} // namespace

void init_ops_quantized(nb::module_& m) {
  m.def(
      "quantize",
      [](ArrayLike w, std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, nb::handle global_scale,
         const StreamArg& s) {
        auto g = global_scale_of(global_scale, "quantize", mode);
        if (microscaling(mode)) {
          auto [q, scales] =
              quantize_fp(to_array(w), group_of(group_size, mode),
                          bits_of(bits, mode), mode, g, to_sod(s));
          return nb::make_tuple(q, scales);
        }
        auto [q, scales, biases] = quantize(
            to_array(w), group_of(group_size), bits_of(bits), mode, to_sod(s));
        return nb::make_tuple(q, scales, biases);
      },
      "w"_a, "group_size"_a = nb::none(),
      "bits"_a = nb::none(), "mode"_a = "affine", nb::kw_only(),
      "global_scale"_a = nb::none(), "stream"_a = nb::none(),
      "(w_q, scales, biases): groups of group_size values along the last "
      "axis share a scale and a bias; codes of `bits` bits packed in uint32.");
  m.def(
      "dequantize",
      [](ArrayLike w, ArrayLike scales, nb::handle biases,
         std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, nb::handle global_scale,
         std::optional<Dtype> dtype, const StreamArg& s) {
        auto g = global_scale_of(global_scale, "dequantize", mode);
        if (microscaling(mode)) {
          no_biases(biases, "dequantize", mode);
          // MLX's default output: bfloat16, float32 with a global scale.
          if (g && g->size() != 1) {
            throw nb::value_error(("[dequantize] the global scale must be a "
                                   "scalar; got " + detail::describe(*g) + ".")
                                      .c_str());
          }
          return dequantize_fp(to_array(w), to_array(scales),
                               group_of(group_size, mode), bits_of(bits, mode),
                               mode, dtype.value_or(g ? float32 : bfloat16), g,
                               to_sod(s));
        }
        return dequantize(to_array(w), to_array(scales),
                          biases_of(biases, "dequantize"),
                          group_of(group_size), bits_of(bits), mode, dtype,
                          to_sod(s));
      },
      "w"_a, "scales"_a, "biases"_a = nb::none(),
      "group_size"_a = nb::none(), "bits"_a = nb::none(),
      "mode"_a = "affine", "global_scale"_a = nb::none(),
      "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "codes * scales + biases, per group.");
  m.def(
      "quantized_matmul",
      [](ArrayLike x, ArrayLike w, ArrayLike scales, nb::handle biases,
         bool transpose, std::optional<int> group_size,
         std::optional<int> bits, const std::string& mode,
         const StreamArg& s) {
        if (microscaling(mode)) {
          no_biases(biases, "quantized_matmul", mode);
          return quantized_matmul_fp(to_array(x), to_array(w),
                                     to_array(scales), transpose,
                                     group_of(group_size, mode),
                                     bits_of(bits, mode), mode, to_sod(s));
        }
        return quantized_matmul(to_array(x), to_array(w), to_array(scales),
                                biases_of(biases, "quantized_matmul"),
                                transpose, group_of(group_size), bits_of(bits),
                                mode, to_sod(s));
      },
      "x"_a, "w"_a, "scales"_a, "biases"_a = nb::none(),
      "transpose"_a = true, "group_size"_a = nb::none(),
      "bits"_a = nb::none(), "mode"_a = "affine", nb::kw_only(),
      "stream"_a = nb::none(),
      "x @ dequantize(w).T (transpose=True) or x @ dequantize(w).");
  m.def(
      "gather_qmm",
      [](ArrayLike x, ArrayLike w, ArrayLike scales, nb::handle biases,
         nb::handle lhs_indices, nb::handle rhs_indices, bool transpose,
         std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, nb::handle global_scale,
         bool sorted_indices, const StreamArg& s) {
        auto g = global_scale_of(global_scale, "gather_qmm", mode);
        std::optional<array> b;
        if (!biases.is_none()) b = to_array(biases);
        return gather_qmm(to_array(x), to_array(w), to_array(scales), b,
                          opt_array(lhs_indices), opt_array(rhs_indices),
                          transpose, group_of(group_size, mode),
                          bits_of(bits, mode), mode, sorted_indices, g,
                          to_sod(s));
      },
      "x"_a, "w"_a, "scales"_a, "biases"_a = nb::none(),
      "lhs_indices"_a.none() = nb::none(), "rhs_indices"_a.none() = nb::none(),
      "transpose"_a = true, "group_size"_a = nb::none(),
      "bits"_a = nb::none(), "mode"_a = "affine",
      "global_scale"_a.none() = nb::none(), nb::kw_only(),
      "sorted_indices"_a = false, "stream"_a = nb::none(),
      "gather_mm with a quantized w (quantized_matmul's arguments): the "
      "batch matrices of x and of dequantize(w) picked by flat batch "
      "indices; a few rows per pick read its packed codes in place.");
  m.def(
      "qqmm",
      [](ArrayLike x, ArrayLike w, nb::handle scales,
         std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, nb::handle global_scale_x,
         nb::handle global_scale_w, const StreamArg& s) {
        return qqmm(to_array(x), to_array(w), opt_array(scales), group_size,
                    bits, mode, opt_array(global_scale_x),
                    opt_array(global_scale_w), to_sod(s));
      },
      "x"_a, "w"_a, "scales"_a.none() = nb::none(),
      "group_size"_a = nb::none(), "bits"_a = nb::none(), "mode"_a = "nvfp4",
      "global_scale_x"_a.none() = nb::none(),
      "global_scale_w"_a.none() = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(),
      "x @ w.T with x quantized on the fly and w as given when quantized "
      "(with scales) or quantized on the fly; modes nvfp4 and mxfp8. "
      "Gradients (w not quantized) quantize their products too.");
  m.def(
      "gather_qqmm",
      [](ArrayLike x, ArrayLike w, nb::handle scales, nb::handle lhs_indices,
         nb::handle rhs_indices, std::optional<int> group_size,
         std::optional<int> bits, const std::string& mode,
         nb::handle global_scale_x, nb::handle global_scale_w,
         bool sorted_indices, const StreamArg& s) {
        return gather_qqmm(to_array(x), to_array(w), opt_array(scales),
                           opt_array(lhs_indices), opt_array(rhs_indices),
                           group_size, bits, mode, opt_array(global_scale_x),
                           opt_array(global_scale_w), sorted_indices,
                           to_sod(s));
      },
      "x"_a, "w"_a, "scales"_a.none() = nb::none(),
      "lhs_indices"_a.none() = nb::none(), "rhs_indices"_a.none() = nb::none(),
      "group_size"_a = nb::none(), "bits"_a = nb::none(), "mode"_a = "nvfp4",
      "global_scale_x"_a.none() = nb::none(),
      "global_scale_w"_a.none() = nb::none(), nb::kw_only(),
      "sorted_indices"_a = false, "stream"_a = nb::none(),
      "qqmm with a matrix-level gather: the batch matrices of x and w that "
      "flat batch indices pick.");
  m.def(
      "to_fp8",
      [](ArrayLike x, const StreamArg& s) { return to_fp8(to_array(x), to_sod(s)); },
      "x"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Floats to fp8 (e4m3) codes in uint8: rounded to nearest even, "
      "saturated at +-448.");
  m.def(
      "from_fp8",
      [](ArrayLike x, Dtype dtype, const StreamArg& s) {
        return from_fp8(to_array(x), dtype, to_sod(s));
      },
      "x"_a, "dtype"_a = bfloat16, nb::kw_only(), "stream"_a = nb::none(),
      "fp8 (e4m3) codes in uint8 to a float type.");
}

} // namespace kiln::py
