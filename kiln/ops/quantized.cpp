// quantize, dequantize and quantized_matmul (affine mode) from existing
// ops, with the primitives that run them where kernels exist, and
// gather_qmm over them. Codes are a little-endian bit stream in uint32 words:
// 32 codes of `bits` bits fill exactly `bits` words, so the stream is cut into
// blocks of 32 codes and `bits` words, and code j of a block lies in word (j *
// bits) / 32 at bit (j * bits) % 32, its top bits in the next word when it
// crosses one (3, 5 and 6 bits).
#include "kiln/ops/quantized.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/gather_batches.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/quantized.h"

namespace kiln {

namespace detail {

bool quantized_kernel_dtype(Dtype dt) {
  return dt == float32 || dt == float16 || dt == bfloat16;
}

bool quantized_kernel_device(const Stream& s) {
  return s.device.type == Device::cpu || s.device.type == Device::gpu;
}

} // namespace detail

using detail::quantized_kernel_device;
using detail::quantized_kernel_dtype;

namespace {

constexpr int block = 32; // codes per block of `bits` words

void check_mode(const char* op, const std::string& mode) {
  if (mode != "affine") {
    throw std::invalid_argument(
        std::string("[") + op + "] mode '" + mode +
        "' is not the affine mode: the microscaling modes (mxfp4, mxfp8, "
        "nvfp4) are quantize_fp, dequantize_fp and quantized_matmul_fp.");
  }
}

void check_params(const char* op, int group_size, int bits) {
  if (group_size != 32 && group_size != 64 && group_size != 128) {
    throw std::invalid_argument(std::string("[") + op + "] group_size " +
                                std::to_string(group_size) +
                                " is not supported (32, 64 or 128).");
  }
  if (bits < 1 || bits > 8 || bits == 7) {
    throw std::invalid_argument(std::string("[") + op + "] bits " +
                                std::to_string(bits) +
                                " is not supported (1 to 6, or 8).");
  }
}

// Where each code of a block lies: its word, its bit offset there, and
// (for codes that cross into the next word) how far left the next word's
// bits go. One row of `block` entries, broadcast over blocks.
struct Layout {
  array word, shift, carry_word, carry_shift, crosses;
};

Layout layout(int bits, StreamOrDevice s) {
  std::vector<uint32_t> word(block), shift(block), carry_word(block),
      carry_shift(block);
  for (int j = 0; j < block; ++j) {
    int bit = j * bits;
    word[j] = bit / 32;
    shift[j] = bit % 32;
    bool crosses = shift[j] + bits > 32;
    // A code that stays in its word takes nothing from the next one; its
    // carry reads its own word with a zero shift, masked off below.
    carry_word[j] = crosses ? word[j] + 1 : word[j];
    carry_shift[j] = crosses ? 32 - shift[j] : 0;
  }
  auto row = [](const std::vector<uint32_t>& v) {
    return array(v, {block}, uint32);
  };
  array carry = row(carry_shift);
  return {row(word), row(shift), row(carry_word), carry,
          not_equal(carry, array(0u), s)};
}

// quantize as a graph of ops (the GPU's path, and the CPU kernel's
// fallback); w is checked.
std::tuple<array, array, array> quantize_graph(const array& w, int group_size,
                                               int bits, StreamOrDevice s) {
  int n = w.shape(-1);
  Shape lead(w.shape().begin(), w.shape().end() - 1);
  Shape grouped = lead;
  grouped.push_back(n / group_size);
  grouped.push_back(group_size);
  array g = reshape(astype(w, float32, s), grouped, s);
  array levels(static_cast<float>((1 << bits) - 1));
  array w_max = max(g, -1, true, s), w_min = min(g, -1, true, s);
  array scale = maximum(divide(subtract(w_max, w_min, s), levels, s),
                        array(1e-7f), s);
  array bias = w_min;
  array zero(0.0f);
  if (bits > 1) {
    // The end of larger magnitude is represented exactly, as MLX does
    // (with one bit, codes 0 and 1 stand for the group's min and max).
    array low_end = greater(abs(w_min, s), abs(w_max, s), s);
    scale = where(low_end, scale, negative(scale, s), s);
    array edge = where(low_end, w_min, w_max, s);
    array q0 = round(divide(edge, scale, s), 0, s);
    scale = where(not_equal(q0, zero, s), divide(edge, q0, s), scale, s);
    bias = where(equal(q0, zero, s), zero, edge, s);
  }
  array codes = astype(
      clip(round(divide(subtract(g, bias, s), scale, s), 0, s), zero, levels,
           s),
      uint32, s);
  // Pack: each block of 32 codes sums its codes' bit fields into `bits`
  // words (the fields do not overlap, so the sum is their union).
  Shape blocks = lead;
  blocks.push_back(n / block);
  blocks.push_back(block);
  codes = expand_dims(reshape(codes, blocks, s), -1, s); // (..., B, 32, 1)
  Layout L = layout(bits, s);
  array words = arange(0.0, double(bits), 1.0, uint32, s); // (bits,)
  auto column = [&](const array& a) { return expand_dims(a, -1, s); };
  array low = multiply(
      left_shift(codes, column(L.shift), s),
      astype(equal(column(L.word), words, s), uint32, s), s);
  array high = multiply(
      right_shift(codes, column(where(L.crosses, subtract(array(32u), L.shift,
                                                           s),
                                      array(0u), s)),
                  s),
      astype(logical_and(column(L.crosses),
                         equal(column(L.carry_word), words, s), s),
             uint32, s),
      s);
  array packed = sum(add(low, high, s), -2, false, s); // (..., B, bits)
  Shape out_shape = lead;
  out_shape.push_back(n * bits / 32);
  Shape param_shape = lead;
  param_shape.push_back(n / group_size);
  return {reshape(packed, out_shape, s),
          astype(reshape(scale, param_shape, s), w.dtype(), s),
          astype(reshape(bias, param_shape, s), w.dtype(), s)};
}

} // namespace

std::tuple<array, array, array> quantize(const array& w, int group_size,
                                         int bits, const std::string& mode,
                                         StreamOrDevice s_) {
  const char* op = "quantize";
  Stream s = to_stream(s_);
  check_mode(op, mode);
  check_params(op, group_size, bits);
  if (w.ndim() < 2) {
    throw std::invalid_argument(
        "[quantize] the array to quantize needs at least 2 dimensions, got " +
        detail::describe(w) + ".");
  }
  if (!issubdtype(w.dtype(), floating)) {
    throw std::invalid_argument("[quantize] only floating arrays quantize, "
                                "got " +
                                detail::describe(w) + ".");
  }
  int n = w.shape(-1);
  if (n % group_size != 0) {
    throw std::invalid_argument(
        "[quantize] the last axis of " + detail::describe(w) +
        " is not a multiple of the group size " + std::to_string(group_size) +
        ".");
  }
  Dtype dt = w.dtype();
  if (s.device.type != Device::cpu || !quantized_kernel_dtype(dt)) {
    return quantize_graph(w, group_size, bits, s);
  }
  // The CPU quantizes group by group in one pass; the graph is its
  // fallback (transformations).
  auto fallback = [=](std::vector<array> in) {
    auto [q, scales, biases] = quantize_graph(in[0], group_size, bits, s);
    return std::vector<array>{q, scales, biases};
  };
  Shape lead(w.shape().begin(), w.shape().end() - 1);
  Shape q_shape = lead, param_shape = lead;
  q_shape.push_back(n * bits / 32);
  param_shape.push_back(n / group_size);
  auto outs = array::make_arrays(
      {q_shape, param_shape, param_shape}, {uint32, dt, dt},
      std::make_shared<fast::Quantize>(s, std::move(fallback), group_size,
                                       bits),
      {contiguous(w, false, s)});
  return {outs[0], outs[1], outs[2]};
}

namespace {

// The codes of w as float32, shape (..., N).
array unpack(const array& w, int bits, StreamOrDevice s) {
  int words = w.shape(-1);
  int n = words * 32 / bits;
  Shape lead(w.shape().begin(), w.shape().end() - 1);
  Shape blocks = lead;
  blocks.push_back(n / block);
  blocks.push_back(bits);
  array b = reshape(w, blocks, s); // (..., B, bits)
  Layout L = layout(bits, s);
  array low = right_shift(take(b, L.word, -1, s), L.shift, s);
  array high = where(
      L.crosses,
      left_shift(take(b, L.carry_word, -1, s), L.carry_shift, s),
      array(0u), s);
  array mask((1u << bits) - 1u);
  array codes = bitwise_and(bitwise_or(low, high, s), mask, s);
  Shape flat = lead;
  flat.push_back(n);
  return reshape(astype(codes, float32, s), flat, s);
}

void check_quantized(const char* op, const array& w, const array& scales,
                     const array& biases, int group_size, int bits) {
  if (w.dtype() != uint32 || w.ndim() < 2) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] the quantized array must be uint32 with at least 2 dimensions, "
        "got " +
        detail::describe(w) + ".");
  }
  int64_t words = w.shape(-1);
  if ((words * 32) % (int64_t(bits) * block) != 0) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + detail::describe(w) + " does not hold "
        "whole blocks of " + std::to_string(block) + " codes of " +
        std::to_string(bits) + " bits.");
  }
  int64_t n = words * 32 / bits;
  Shape expected(w.shape().begin(), w.shape().end() - 1);
  expected.push_back(static_cast<int32_t>(n / group_size));
  if (n % group_size != 0 || scales.shape() != expected ||
      biases.shape() != expected) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + detail::describe(w) + " holds " +
        std::to_string(n) + " codes per row, so scales and biases should be " +
        detail::shape_str(expected) + " for group_size " +
        std::to_string(group_size) + "; got " + detail::describe(scales) +
        " and " + detail::describe(biases) + ".");
  }
  if (!issubdtype(scales.dtype(), floating) ||
      biases.dtype() != scales.dtype()) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] scales and biases must share one floating dtype, got " +
        detail::describe(scales) + " and " + detail::describe(biases) + ".");
  }
}

// dequantize as a graph of ops (the GPU's path, and the CPU kernel's
// fallback).
array dequantize_graph(const array& w, const array& scales,
                       const array& biases, int group_size, int bits,
                       Dtype out_dt, StreamOrDevice s) {
  array codes = unpack(w, bits, s); // (..., N)
  Shape lead(w.shape().begin(), w.shape().end() - 1);
  int n = codes.shape(-1);
  Shape grouped = lead;
  grouped.push_back(n / group_size);
  grouped.push_back(group_size);
  // In the scales' dtype, each step rounded to it, as MLX computes it.
  codes = reshape(astype(codes, scales.dtype(), s), grouped, s);
  array out = add(multiply(codes, expand_dims(scales, -1, s), s),
                  expand_dims(biases, -1, s), s);
  Shape flat = lead;
  flat.push_back(n);
  return astype(reshape(out, flat, s), out_dt, s);
}

} // namespace

array dequantize(const array& w, const array& scales, const array& biases,
                 int group_size, int bits, const std::string& mode,
                 std::optional<Dtype> dtype, StreamOrDevice s) {
  const char* op = "dequantize";
  check_mode(op, mode);
  check_params(op, group_size, bits);
  check_quantized(op, w, scales, biases, group_size, bits);
  if (dtype && !issubdtype(*dtype, floating)) {
    throw std::invalid_argument("[dequantize] dtype must be floating, got " +
                                dtype_name(*dtype) + ".");
  }
  Stream st = to_stream(s);
  Dtype out_dt = dtype.value_or(scales.dtype());
  if (quantized_kernel_device(st) && quantized_kernel_dtype(scales.dtype()) &&
      quantized_kernel_dtype(out_dt)) {
    // A kernel dequantizes group by group in one pass; the graph is its
    // fallback (transformations).
    auto fallback = [=](std::vector<array> in) {
      return std::vector<array>{dequantize_graph(in[0], in[1], in[2],
                                                 group_size, bits, out_dt, st)};
    };
    Shape shape = w.shape();
    shape.back() = static_cast<int32_t>(int64_t(shape.back()) * 32 / bits);
    return array(shape, out_dt,
                 std::make_shared<fast::Dequantize>(st, std::move(fallback),
                                                    group_size, bits),
                 {contiguous(w, false, st), contiguous(scales, false, st),
                  contiguous(biases, false, st)});
  }
  return dequantize_graph(w, scales, biases, group_size, bits, out_dt, st);
}

namespace {

// x @ dequantize(w).T (or without the transpose), as a graph of ops.
array quantized_matmul_graph(const array& x, const array& w,
                             const array& scales, const array& biases,
                             bool transpose, int group_size, int bits,
                             StreamOrDevice s) {
  array wd = dequantize(w, scales, biases, group_size, bits, "affine",
                        x.dtype() == float64 ? float64 : scales.dtype(), s);
  return matmul(x, transpose ? swapaxes(wd, -1, -2, s) : wd, s);
}

} // namespace

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const array& biases, bool transpose, int group_size,
                       int bits, const std::string& mode, StreamOrDevice s) {
  const char* op = "quantized_matmul";
  check_mode(op, mode);
  check_params(op, group_size, bits);
  check_quantized(op, w, scales, biases, group_size, bits);
  int64_t rows = w.shape(-2), cols = int64_t(w.shape(-1)) * 32 / bits;
  int64_t inner = transpose ? cols : rows;
  if (x.ndim() < 1 || x.shape(-1) != inner) {
    throw std::invalid_argument(
        "[quantized_matmul] the last axis of " + detail::describe(x) +
        " does not match the dequantized matrix (" + std::to_string(rows) +
        ", " + std::to_string(cols) + ") with transpose=" +
        (transpose ? "true" : "false") + ".");
  }
  Stream st = to_stream(s);
  Dtype dt = x.dtype();
  // A batch of matrices (gather_qmm's picked experts) when x has the
  // same batch: one product per matrix.
  bool batch = w.ndim() == 3 && x.ndim() == 3 && x.shape(0) == w.shape(0);
  bool kernel = transpose && (w.ndim() == 2 || batch) &&
                quantized_kernel_device(st) && scales.dtype() == dt &&
                quantized_kernel_dtype(dt);
  if (!kernel) {
    return quantized_matmul_graph(x, w, scales, biases, transpose, group_size,
                                  bits, st);
  }
  // The kernels read the packed codes directly; the graph is their
  // fallback (gradients, batching).
  auto fallback = [=](std::vector<array> in) {
    return std::vector<array>{quantized_matmul_graph(
        in[0], in[1], in[2], in[3], true, group_size, bits, st)};
  };
  Shape shape = x.shape();
  shape.back() = w.shape(-2);
  return array(shape, dt,
               std::make_shared<fast::QuantizedMatmul>(st, std::move(fallback),
                                                       group_size, bits),
               {contiguous(x, false, st), contiguous(w, false, st),
                contiguous(scales, false, st), contiguous(biases, false, st)});
}

namespace {

void check_gather_qmm(const array& x, const array& w, const array& scales,
                      const std::optional<array>& biases,
                      const std::string& mode) {
  const char* op = "gather_qmm";
  if ((mode == "affine") != biases.has_value()) {
    detail::invalid(op, "the affine mode needs biases (from quantize) and "
                        "the others have none; got mode '" +
                            mode + "' with biases " +
                            (biases ? "given" : "absent") + ".");
  }
  if (x.ndim() < 2 || w.ndim() < 2) {
    detail::invalid(op, "operands need at least 2 dimensions, got x " +
                            detail::describe(x) + " and w " +
                            detail::describe(w) + ".");
  }
  Shape wb(w.shape().begin(), w.shape().end() - 2);
  Shape sb(scales.shape().begin(), scales.shape().end() - 2);
  if (scales.ndim() < 2 || sb != wb ||
      (biases && biases->shape() != scales.shape())) {
    detail::invalid(op, "scales " + detail::describe(scales) +
                            " (and biases) must share the batch dimensions "
                            "of w " +
                            detail::describe(w) + ".");
  }
}

} // namespace

array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases,
                 std::optional<array> lhs_indices,
                 std::optional<array> rhs_indices, bool transpose,
                 int group_size, int bits, const std::string& mode,
                 bool sorted_indices, const std::optional<array>& global_scale,
                 StreamOrDevice s) {
  const char* op = "gather_qmm";
  check_gather_qmm(x, w, scales, biases, mode);
  const bool affine = mode == "affine";
  auto qmm = [&](const array& a, const array& q, const array& sc,
                 const std::optional<array>& bi) {
    return affine ? quantized_matmul(a, q, sc, *bi, transpose, group_size,
                                     bits, mode, s)
                  : quantized_matmul_fp(a, q, sc, transpose, group_size,
                                        bits, mode, s);
  };
  if (global_scale) {
    const int64_t matrices =
        w.ndim() > 2 ? shape_size(w.shape()) / (w.shape(-1) * w.shape(-2)) : 1;
    if (mode != "nvfp4" || (!lhs_indices && !rhs_indices) ||
        global_scale->ndim() != 1 || global_scale->shape(0) != matrices) {
      throw std::invalid_argument(
          "[gather_qmm] a global scale is nvfp4's, one per matrix of w (" +
          std::to_string(matrices) + " for w " + detail::describe(w) +
          "), with indices; got " + detail::describe(*global_scale) +
          " in mode '" + mode + "'" +
          (lhs_indices || rhs_indices ? "." : " without indices."));
    }
  }
  if (!lhs_indices && !rhs_indices) return qmm(x, w, scales, biases);
  Stream st = to_stream(s);
  std::string operands = "x " + detail::describe(x) + " and w " +
                         detail::describe(w);
  array li = detail::batch_indices(lhs_indices, x, op, "lhs_indices",
                                   operands, st);
  array ri = detail::batch_indices(rhs_indices, w, op, "rhs_indices",
                                   operands, st);
  Shape batch = detail::broadcast_shapes(li.shape(), ri.shape(), op);
  array fw = detail::flat_batch(w, st);
  array fs = detail::flat_batch(scales, st);
  std::optional<array> fb;
  if (biases) fb = detail::flat_batch(*biases, st);
  const int64_t experts = fw.shape(0), rows = x.shape(-2);
  const int64_t picks = shape_size(batch);
  if (picks * rows >= 8 * experts || global_scale) {
    // Many rows per matrix: each matrix dequantized once, and gather_mm
    // reads the picked ones in place.
    Dtype dt = issubdtype(x.dtype(), floating) ? x.dtype() : float32;
    array wd = affine ? dequantize(fw, fs, *fb, group_size, bits, mode, dt, st)
                      : dequantize_fp(fw, fs, group_size, bits, mode, dt,
                                      global_scale, st);
    Shape ws(w.shape().begin(), w.shape().end() - 2);
    ws.insert(ws.end(), {wd.shape(-2), wd.shape(-1)});
    wd = reshape(wd, ws, st);
    return gather_mm(x, transpose ? swapaxes(wd, -1, -2, st) : wd,
                     lhs_indices, rhs_indices, sorted_indices, st);
  }
  array left = take(detail::flat_batch(x, st),
                    flatten(broadcast_to(li, batch, st), 0, -1, st), 0, st);
  array right = flatten(broadcast_to(ri, batch, st), 0, -1, st);
  Dtype dt = left.dtype();
  array out = [&] {
    if (!affine && transpose) {
      // The microscaling modes' kernels read the picks in place when they
      // take the operands.
      if (auto r = detail::gather_qmm_fp_in_place(left, fw, fs, right,
                                                  group_size, bits, mode, st)) {
        return *r;
      }
    }
    bool in_place = affine && transpose &&
                    rows <= fast::QuantizedMatmul::max_picked_rows &&
                    quantized_kernel_device(st) &&
                    quantized_kernel_dtype(dt) && fs.dtype() == dt &&
                    left.shape(-1) == int64_t(fw.shape(-1)) * 32 / bits;
    // take reads the indices as int32, as the kernels do (negative from
    // the end; uint32 would read them as past the end).
    if (!in_place) {
      array r = astype(right, int32, st);
      auto pick = [&](const array& a) { return take(a, r, 0, st); };
      return qmm(left, pick(fw), pick(fs),
                 fb ? std::optional<array>(pick(*fb)) : std::nullopt);
    }
    check_quantized(op, fw, fs, *fb, group_size, bits);
    // The kernels read each pick's matrix through its index; the graph
    // (take the picks' codes, then the product) is their fallback.
    auto fallback = [=](std::vector<array> in) {
      array r = astype(in[4], int32, st);
      auto pick = [&](const array& a) { return take(a, r, 0, st); };
      return std::vector<array>{
          quantized_matmul_graph(in[0], pick(in[1]), pick(in[2]),
                                 pick(in[3]), true, group_size, bits, st)};
    };
    Shape shape = left.shape();
    shape.back() = fw.shape(-2);
    return array(shape, dt,
                 std::make_shared<fast::QuantizedMatmul>(
                     st, std::move(fallback), group_size, bits),
                 {contiguous(left, false, st), contiguous(fw, false, st),
                  contiguous(fs, false, st), contiguous(*fb, false, st),
                  contiguous(right, false, st)});
  }();
  Shape full = batch;
  full.insert(full.end(), {out.shape(-2), out.shape(-1)});
  return reshape(out, full, st);
}

} // namespace kiln
