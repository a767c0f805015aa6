// Quantized weights as mlx.core's affine mode: each group of group_size
// consecutive values along the last axis shares a scale and a bias, and
// stores bits-bit codes packed as a little-endian bit stream in uint32
// words (value j at bit j * bits), so arrays quantized by MLX load and
// dequantize here and back. Built from existing ops, so they run on every
// device, inside compile, and transformations reach through them.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** {w_q (uint32, last axis N * bits / 32), scales, biases (last axis
 *  N / group_size, w's dtype)} for w of at least 2 dimensions whose last
 *  axis N is a multiple of group_size. Per group, in float32: the end of
 *  larger magnitude (max or min) is represented exactly, scale =
 *  (max - min) / (2^bits - 1) adjusted so, and code = round((w - bias) /
 *  scale) clipped to [0, 2^bits - 1] (with one bit, scale = max - min and
 *  bias = min). group_size is 32, 64 or 128; bits 1
 *  to 6 or 8; mode "affine" (the microscaling modes are quantize_fp). */
std::tuple<array, array, array> quantize(const array& w, int group_size = 64,
                                         int bits = 4,
                                         const std::string& mode = "affine",
                                         StreamOrDevice s = {});

/** code * scale + bias in scales' dtype (each step rounded to it), cast
 *  to dtype when given. */
array dequantize(const array& w, const array& scales, const array& biases,
                 int group_size = 64, int bits = 4,
                 const std::string& mode = "affine",
                 std::optional<Dtype> dtype = std::nullopt,
                 StreamOrDevice s = {});

/** x @ dequantize(w).T (transpose, w as (out, in) like a Linear's
 *  weight), or x @ dequantize(w). */
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const array& biases, bool transpose = true,
                       int group_size = 64, int bits = 4,
                       const std::string& mode = "affine",
                       StreamOrDevice s = {});

/** gather_mm with a quantized w (quantized_matmul's arguments; biases
 *  only in the affine mode): the batch matrices of x and of dequantize(w)
 *  that flat batch indices pick (all of a batch, in order, when absent).
 *  A few rows per picked matrix read its packed codes in place (the
 *  affine mode, transpose, up to 16 rows per pick); more rows per matrix
 *  (at least 8 per matrix of w) dequantize w once for gather_mm.
 *  global_scale: nvfp4's, one per matrix of w (float32, w's batch size),
 *  with indices only, as MLX's. */
array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases,
                 std::optional<array> lhs_indices = std::nullopt,
                 std::optional<array> rhs_indices = std::nullopt,
                 bool transpose = true, int group_size = 64, int bits = 4,
                 const std::string& mode = "affine",
                 bool sorted_indices = false,
                 const std::optional<array>& global_scale = std::nullopt,
                 StreamOrDevice s = {});

/** The microscaling modes "mxfp4" (group_size 32, bits 4), "mxfp8" (32, 8)
 *  and "nvfp4" (16, 4), as MLX's: {w_q (uint32, packed codes), scales
 *  (uint8: e8m0 exponents, or e4m3 for nvfp4)}; no biases. nvfp4 takes a
 *  second-level global_scale g (float32, one value; MLX's convention is
 *  the tensor's max |w|): the e4m3 scales are stored divided by g / 2688,
 *  so that groups of smaller magnitude keep e4m3's precision. */
std::pair<array, array> quantize_fp(
    const array& w, int group_size, int bits, const std::string& mode,
    const std::optional<array>& global_scale = std::nullopt,
    StreamOrDevice s = {});
/** code * scale (* g / 2688 with nvfp4's global scale g: one value, or
 *  one per matrix of a 3-D w). */
array dequantize_fp(const array& w, const array& scales, int group_size,
                    int bits, const std::string& mode, Dtype dtype = bfloat16,
                    const std::optional<array>& global_scale = std::nullopt,
                    StreamOrDevice s = {});
/** x @ dequantize_fp(w).T (transpose) or x @ dequantize_fp(w), in x's
 *  float type. A few rows of x (transpose, one matrix: up to 7 on the
 *  CPU, 8 on the GPU) read the codes in place. */
array quantized_matmul_fp(const array& x, const array& w, const array& scales,
                          bool transpose, int group_size, int bits,
                          const std::string& mode, StreamOrDevice s = {});

/** x @ w.T with both operands through a microscaling mode, as MLX's
 *  qqmm: "nvfp4" (group_size 16, bits 4) or "mxfp8" (32, 8). x (..., K)
 *  of float32/float16/bfloat16 is quantized along K on the fly; w (N, K)
 *  is used as given when quantized (uint32 codes with their uint8
 *  scales) or quantized on the fly. nvfp4 takes both global scales or
 *  neither. The product of the dequantized values is taken in float32
 *  and returned in x's dtype. Gradients quantize their products too: dx
 *  = qqmm(g, w.T), dw = qqmm(g.T, x.T) (w unquantized; a quantized w gets
 *  none), N and x's rows padded with zeros to whole groups. */
array qqmm(const array& x, const array& w,
           const std::optional<array>& scales = std::nullopt,
           std::optional<int> group_size = std::nullopt,
           std::optional<int> bits = std::nullopt,
           const std::string& mode = "nvfp4",
           const std::optional<array>& global_scale_x = std::nullopt,
           const std::optional<array>& global_scale_w = std::nullopt,
           StreamOrDevice s = {});

/** qqmm with gather_mm's matrix-level gather: the batch matrices of x and
 *  of w (..., N, K) that flat batch indices pick (all, in order, when
 *  absent). Not differentiable yet (it raises). */
array gather_qqmm(const array& x, const array& w,
                  const std::optional<array>& scales = std::nullopt,
                  std::optional<array> lhs_indices = std::nullopt,
                  std::optional<array> rhs_indices = std::nullopt,
                  std::optional<int> group_size = std::nullopt,
                  std::optional<int> bits = std::nullopt,
                  const std::string& mode = "nvfp4",
                  const std::optional<array>& global_scale_x = std::nullopt,
                  const std::optional<array>& global_scale_w = std::nullopt,
                  bool sorted_indices = false, StreamOrDevice s = {});

/** Floats (float32, float16, bfloat16, float64) to fp8 e4m3 codes in
 *  uint8, as MLX's to_fp8: rounded to nearest even, saturated at +-448
 *  (infinities and NaN included, keeping their sign). */
array to_fp8(const array& x, StreamOrDevice s = {});
/** fp8 e4m3 codes (uint8) to `dtype` (a float type); code 0x7f / 0xff is
 *  NaN. */
array from_fp8(const array& x, Dtype dtype = bfloat16, StreamOrDevice s = {});

namespace detail {

/** The dtypes of x, the scales and the outputs the quantization kernels
 *  take: float32, float16, bfloat16. */
bool quantized_kernel_dtype(Dtype dt);
/** Devices with quantization kernels: the CPU and the GPU. */
bool quantized_kernel_device(const Stream& s);
/** gather_qmm's picks in the microscaling modes read in place: left (P,
 *  M, K) against matrix picks[p] of w (E, N, K * bits / 32) with its
 *  scales, transposed (GatherMM's index rule); nullopt where the kernels
 *  do not take the operands (the caller composes take and
 *  quantized_matmul_fp). */
std::optional<array> gather_qmm_fp_in_place(const array& left,
                                            const array& w,
                                            const array& scales,
                                            const array& picks,
                                            int group_size, int bits,
                                            const std::string& mode,
                                            StreamOrDevice s = {});

} // namespace detail

} // namespace kiln
