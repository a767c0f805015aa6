// Import rows for the quantization family: Quantize (either way, per its
// dequantize flag), QuantizedMatmul and GatherQMM, in each of MLX's modes.
#include "kiln/io/mlxfn_rows.h"
#include "kiln/ops/quantized.h"

namespace kiln::detail::mlxfn {

namespace {

using Inputs = std::vector<array>;

// MLX's QuantizationMode, in its order.
const char* const mode_names[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};

const char* mode_of(const char* name, const Value& v) {
  if (v.i < 0 || v.i > 3)
    bad(name, "unknown quantization mode " + std::to_string(v.i));
  return mode_names[v.i];
}

// Parameters: (placeholder, group_size, bits, mode, dequantize). Inputs:
// w (and nvfp4's global scale) to quantize; the codes, scales and affine
// biases (or nvfp4's global scale) to dequantize.
std::vector<array> quantize(const State& st, const Inputs& in,
                            const NodeInfo& info, Stream s) {
  int gs = static_cast<int>(st[1].i), bits = static_cast<int>(st[2].i);
  std::string mode = mode_of("Quantize", st[3]);
  bool affine = mode == "affine";
  if (!st[4].i) {
    if (affine) {
      arity("Quantize", in, 1, 1);
      auto [wq, scales, biases] = kiln::quantize(in[0], gs, bits, mode, s);
      return {wq, scales, biases};
    }
    arity("Quantize", in, 1, 2);
    std::optional<array> g;
    if (in.size() == 2) g = in[1];
    auto [wq, scales] = quantize_fp(in[0], gs, bits, mode, g, s);
    return {wq, scales};
  }
  Dtype dt = info.dtypes.at(0);
  if (affine) {
    arity("Quantize", in, 3, 3);
    return {dequantize(in[0], in[1], in[2], gs, bits, mode, dt, s)};
  }
  arity("Quantize", in, 2, 3);
  std::optional<array> g;
  if (in.size() == 3) g = in[2];
  return {dequantize_fp(in[0], in[1], gs, bits, mode, dt, g, s)};
}

// Parameters: (group_size, bits, mode, transpose). Inputs x, w, scales and
// the affine mode's biases.
std::vector<array> quantized_matmul(const State& st, const Inputs& in,
                                    const NodeInfo&, Stream s) {
  int gs = static_cast<int>(st[0].i), bits = static_cast<int>(st[1].i);
  std::string mode = mode_of("QuantizedMatmul", st[2]);
  bool transpose = st[3].i;
  if (mode == "affine") {
    arity("QuantizedMatmul", in, 4, 4);
    return {kiln::quantized_matmul(in[0], in[1], in[2], in[3], transpose, gs,
                                   bits, mode, s)};
  }
  arity("QuantizedMatmul", in, 3, 3);
  return {
      quantized_matmul_fp(in[0], in[1], in[2], transpose, gs, bits, mode, s)};
}

// Parameters: (group_size, bits, mode, transpose, left_sorted,
// right_sorted). Inputs x, w, scales, the affine mode's biases, then the
// left and right indices.
std::vector<array> gather_qmm(const State& st, const Inputs& in,
                              const NodeInfo&, Stream s) {
  int gs = static_cast<int>(st[0].i), bits = static_cast<int>(st[1].i);
  std::string mode = mode_of("GatherQMM", st[2]);
  bool transpose = st[3].i;
  bool affine = mode == "affine";
  arity("GatherQMM", in, affine ? 6 : 5, affine ? 6 : 5);
  std::optional<array> biases;
  if (affine) biases = in[3];
  const array& lhs = in[in.size() - 2];
  const array& rhs = in.back();
  return {kiln::gather_qmm(in[0], in[1], in[2], biases, lhs, rhs, transpose, gs,
                           bits, mode, bool(st[5].i), std::nullopt, s)};
}

} // namespace

void put_quantized_rows(Rows& t) {
  // The first parameter is MLX's empty placeholder.
  t.insert_or_assign("Quantize", Row{"niiib", quantize});
  t.insert_or_assign("QuantizedMatmul", Row{"iiib", quantized_matmul});
  t.insert_or_assign("GatherQMM", Row{"iiibbb", gather_qmm});
}

} // namespace kiln::detail::mlxfn
