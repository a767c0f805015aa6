// The microscaling quantization modes of mlx.core.quantize: groups of
// floating-point codes sharing an 8-bit scale, no bias.
//   mxfp4: 32 values of e2m1 (4 bits) per e8m0 scale (a power of two);
//   mxfp8: 32 values of e4m3 (8 bits) per e8m0 scale;
//   nvfp4: 16 values of e2m1 per e4m3 scale.
// The mx scale is 2^ceil(log2(max|w| / largest code)), so no value clips;
// nvfp4's is max|w| / 6 rounded to e4m3, or with a global scale g (the
// tensor's max|w|, as MLX's), max|w| / 6 / (g / 2688) rounded to e4m3, the
// group's values then being code * scale * (g / 2688) (2688 = 448 * 6, the
// largest e4m3 scale times the largest e2m1 value, so a group as large as
// g gets the largest scale). e2m1 codes round to the nearest value with
// ties toward zero, and a value that rounds to zero is +0; e4m3 codes are
// to_fp8's. Codes are packed from the low bits of uint32 words, as the
// affine mode's. Built from existing ops, as the affine mode's graph is.
// The fp8 (e4m3) conversions, to_fp8 and from_fp8, are here too.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/quantized.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/quantized.h"

namespace kiln {

namespace {

// The non-negative e2m1 values; codes 8-15 are their negatives.
constexpr float e2m1_values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

struct FpMode {
  int group_size;
  int bits;
  bool nv; // e4m3 scales (else e8m0)
};

FpMode fp_mode(const char* op, const std::string& mode, int group_size,
               int bits) {
  FpMode m;
  if (mode == "mxfp4") m = {32, 4, false};
  else if (mode == "mxfp8") m = {32, 8, false};
  else if (mode == "nvfp4") m = {16, 4, true};
  else {
    throw std::invalid_argument(
        std::string("[") + op + "] mode '" + mode +
        "' is not one of 'affine', 'mxfp4', 'mxfp8', 'nvfp4'.");
  }
  if (group_size != m.group_size || bits != m.bits) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + mode +
        " quantization needs group_size " + std::to_string(m.group_size) +
        " and bits " + std::to_string(m.bits) + "; got group_size " +
        std::to_string(group_size) + " and bits " + std::to_string(bits) + ".");
  }
  return m;
}

// (..., n) codes in uint32 packed from the low bits: (..., n * bits / 32).
array pack(const array& codes, int bits, StreamOrDevice s) {
  int per = 32 / bits;
  Shape g = codes.shape();
  g.back() /= per;
  g.push_back(per);
  std::vector<uint32_t> shifts(per);
  for (int j = 0; j < per; ++j) shifts[j] = j * bits;
  array shifted = left_shift(reshape(astype(codes, uint32, s), g, s),
                             array(shifts, Shape{per}, uint32), s);
  return sum(shifted, -1, false, s); // disjoint bits: the sum is their or
}

array unpack(const array& w, int bits, StreamOrDevice s) {
  int per = 32 / bits;
  std::vector<uint32_t> shifts(per);
  for (int j = 0; j < per; ++j) shifts[j] = j * bits;
  array codes = bitwise_and(
      right_shift(expand_dims(w, -1, s), array(shifts, Shape{per}, uint32), s),
      array(uint32_t((1u << bits) - 1)), s);
  Shape out = w.shape();
  out.back() *= per;
  return reshape(codes, out, s);
}

// e2m1 codes of v: the count of midpoints below |v| (ties go to the
// smaller magnitude), the sign bit unless the code is zero.
array e2m1_codes(const array& v, StreamOrDevice s) {
  array a = abs(v, s);
  array k = zeros(v.shape(), uint32, s);
  for (int i = 0; i < 7; ++i) {
    float mid = (e2m1_values[i] + e2m1_values[i + 1]) / 2;
    k = add(k, astype(greater(a, array(mid), s), uint32, s), s);
  }
  array neg = logical_and(less(v, array(0.0f), s),
                          greater(k, array(0u), s), s);
  return add(k, multiply(astype(neg, uint32, s), array(8u), s), s);
}

// A 256-entry table of float32 values, taken at uint8 codes.
array lookup(const std::vector<float>& table, const array& codes,
             StreamOrDevice s) {
  return take(array(table, Shape{int(table.size())}, float32),
              astype(codes, uint32, s), 0, s);
}

// 2^(c - 127) for each e8m0 code c (255 is NaN in the format; MLX never
// writes it).
std::vector<float> e8m0_table() {
  std::vector<float> t(256);
  for (int c = 0; c < 256; ++c) t[c] = std::ldexp(1.0f, c - 127);
  return t;
}

// g / 2688 for nvfp4's global scale g, checked as MLX checks it: nvfp4
// only, float32, one value (`per` values, one per matrix, when per > 0).
array global_factor(const char* op, const std::string& mode,
                    const array& g, int64_t per, StreamOrDevice s) {
  if (mode != "nvfp4") {
    throw std::invalid_argument(
        std::string("[") + op + "] a global scale is only supported in the "
        "nvfp4 mode; got mode '" + mode + "'.");
  }
  if (g.dtype() != float32) {
    throw std::invalid_argument(std::string("[") + op +
                                "] the global scale must be float32; got " +
                                detail::describe(g) + ".");
  }
  if (per > 0 ? (g.ndim() != 1 || g.shape(0) != per) : g.size() != 1) {
    throw std::invalid_argument(
        std::string("[") + op + "] the global scale must be " +
        (per > 0 ? "one value per matrix, (" + std::to_string(per) + ")"
                 : std::string("a scalar")) +
        "; got " + detail::describe(g) + ".");
  }
  return divide(per > 0 ? g : reshape(g, {}, s), array(2688.0f), s);
}

void check_weight(const char* op, const array& w, const FpMode& m) {
  if (w.ndim() < 2 || w.shape(-1) % m.group_size != 0 ||
      !issubdtype(w.dtype(), floating)) {
    throw std::invalid_argument(
        std::string("[") + op + "] needs a float array of at least 2 "
        "dimensions whose last axis is a multiple of " +
        std::to_string(m.group_size) + "; got " + detail::describe(w) + ".");
  }
}

} // namespace

std::pair<array, array> quantize_fp(const array& w, int group_size, int bits,
                                    const std::string& mode,
                                    const std::optional<array>& global_scale,
                                    StreamOrDevice s) {
  const char* op = "quantize";
  FpMode m = fp_mode(op, mode, group_size, bits);
  check_weight(op, w, m);
  std::optional<array> factor;
  if (global_scale) factor = global_factor(op, mode, *global_scale, 0, s);
  Shape g = w.shape();
  g.back() /= m.group_size;
  g.push_back(m.group_size);
  array x = reshape(astype(w, float32, s), g, s);
  array amax = max(abs(x, s), -1, true, s);
  array scale_code(0u), scale(0.0f);
  if (m.nv) {
    array y = divide(amax, array(6.0f), s);
    if (factor) y = divide(y, *factor, s);
    scale_code = to_fp8(y, s);
    scale = from_fp8(scale_code, float32, s);
    if (factor) scale = multiply(scale, *factor, s);
  } else {
    // ceil(log2(y)) exactly from y's bits: its exponent, plus one unless
    // y is a power of two; subnormal y take the smallest, and a group of
    // zeros the scale 1 (as MLX).
    array y = divide(amax, array(m.bits == 4 ? 6.0f : 448.0f), s);
    array yb = view(y, uint32, s);
    array expo = astype(bitwise_and(right_shift(yb, array(23u), s),
                                    array(0xffu), s),
                        int32, s);
    array frac = bitwise_and(yb, array(0x7fffffu), s);
    array e = add(subtract(expo, array(127), s),
                  astype(not_equal(frac, array(0u), s), int32, s), s);
    e = where(equal(expo, array(0), s),
              where(equal(frac, array(0u), s), array(0), array(-127), s), e, s);
    e = clip(e, array(-127), array(127), s);
    scale_code = astype(add(e, array(127), s), uint8, s);
    scale = lookup(e8m0_table(), scale_code, s);
  }
  // A zero scale (nvfp4's of a group below e4m3's range) gives zero codes.
  array v = where(equal(scale, array(0.0f), s), array(0.0f),
                  divide(x, scale, s), s);
  array codes = m.bits == 4 ? e2m1_codes(v, s) : to_fp8(v, s);
  Shape flat = w.shape();
  array packed = pack(reshape(codes, flat, s), m.bits, s);
  return {packed, squeeze(scale_code, -1, s)};
}

namespace {

// Checks w's codes (uint32, whole groups) against its scales (uint8, one
// per group); returns the number of values per row.
int64_t check_codes(const char* op, const std::string& mode, FpMode m,
                    const array& w, const array& scales) {
  int64_t n = int64_t(w.ndim() ? w.shape(-1) : 0) * 32 / m.bits;
  if (w.dtype() != uint32 || scales.dtype() != uint8 || w.ndim() < 1 ||
      scales.ndim() != w.ndim() || n % m.group_size != 0 ||
      scales.shape(-1) != n / m.group_size) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + mode + " needs uint32 codes and uint8 "
        "scales, one per " + std::to_string(m.group_size) + " values; got " +
        detail::describe(w) + " and " + detail::describe(scales) + ".");
  }
  return n;
}

// Whether the kernel that reads the codes takes `rows` rows of x per
// matrix (inner dimension k) on st: on the CPU fewer than 8 (its GEMM's
// threshold), or up to QuantizedMatmul::max_picked_rows picked ones; on
// the GPU up to 8, with k a multiple of its 32-code blocks. The GPU's
// matvec decodes the codes again for every 4 rows: on an H200
// (quantized_bench.py --gpu-modes, bfloat16, 4096 x 4096) 1 row took 5.4
// us against 21 us for dequantize-then-GEMM, 8 rows about the same
// (20.1), 16 rows twice as long (38.0).
bool matvec_takes(const Stream& st, Dtype dt, int64_t rows, int64_t k,
                  bool picked) {
  if (!detail::quantized_kernel_device(st) ||
      !detail::quantized_kernel_dtype(dt) || rows < 1) {
    return false;
  }
  if (st.device.type == Device::cpu) {
    return rows < (picked ? fast::QuantizedMatmul::max_picked_rows + 1 : 8);
  }
  return rows <= 8 && k % 32 == 0;
}

// dequantize_fp as a graph of ops (the kernels' fallback, for
// transformations, and the path of other dtypes and per-matrix factors);
// factor: g / 2688, a scalar or one per matrix.
array dequantize_fp_graph(const array& w, const array& scales, FpMode m,
                          Dtype dtype, const std::optional<array>& factor,
                          StreamOrDevice s) {
  array codes = unpack(w, m.bits, s);
  array values(0.0f);
  if (m.bits == 4) {
    std::vector<float> t(16);
    for (int c = 0; c < 16; ++c) {
      t[c] = c < 8 ? e2m1_values[c] : -e2m1_values[c - 8];
    }
    values = take(array(t, Shape{16}, float32), codes, 0, s);
  } else {
    values = from_fp8(astype(codes, uint8, s), float32, s);
  }
  array scale = m.nv ? from_fp8(scales, float32, s)
                     : lookup(e8m0_table(), scales, s);
  if (factor) {
    // scale * (g / 2688) for each matrix's scales (a scalar broadcasts).
    Shape fs(scale.ndim(), 1);
    if (factor->ndim() == 1) fs[0] = factor->shape(0);
    scale = multiply(scale, reshape(*factor, fs, s), s);
  }
  Shape g = values.shape();
  g.back() /= m.group_size;
  g.push_back(m.group_size);
  array out = multiply(reshape(values, g, s), expand_dims(scale, -1, s), s);
  Shape flat = values.shape();
  return astype(reshape(out, flat, s), dtype, s);
}

} // namespace

array dequantize_fp(const array& w, const array& scales, int group_size,
                    int bits, const std::string& mode, Dtype dtype,
                    const std::optional<array>& global_scale,
                    StreamOrDevice s) {
  const char* op = "dequantize";
  FpMode m = fp_mode(op, mode, group_size, bits);
  if (!issubdtype(dtype, floating)) {
    throw std::invalid_argument("[dequantize] dtype must be floating, got " +
                                dtype_name(dtype) + ".");
  }
  // One global scale, or one per matrix of a 3-D w (gather_qmm's experts).
  std::optional<array> factor;
  if (global_scale) {
    int64_t per = global_scale->size() == 1 || w.ndim() != 3 ? 0 : w.shape(0);
    factor = global_factor(op, mode, *global_scale, per, s);
  }
  const int64_t n = check_codes(op, mode, m, w, scales);
  Stream st = to_stream(s);
  // A kernel decodes the packed words in one pass (the graph is its
  // fallback, for transformations); it takes one global factor.
  if (detail::quantized_kernel_device(st) &&
      detail::quantized_kernel_dtype(dtype) &&
      (!factor || factor->ndim() == 0)) {
    auto fallback = [=](std::vector<array> in) {
      std::optional<array> f;
      if (in.size() > 2) f = in[2];
      return std::vector<array>{
          dequantize_fp_graph(in[0], in[1], m, dtype, f, st)};
    };
    Shape shape = w.shape();
    shape.back() = static_cast<int32_t>(n);
    std::vector<array> inputs = {contiguous(w, false, st),
                                 contiguous(scales, false, st)};
    if (factor) inputs.push_back(astype(*factor, float32, st));
    return array(shape, dtype,
                 std::make_shared<fast::DequantizeFp>(st, std::move(fallback),
                                                      m.group_size, m.bits),
                 inputs);
  }
  return dequantize_fp_graph(w, scales, m, dtype, factor, st);
}

array quantized_matmul_fp(const array& x, const array& w, const array& scales,
                          bool transpose, int group_size, int bits,
                          const std::string& mode, StreamOrDevice s) {
  FpMode m = fp_mode("dequantize", mode, group_size, bits);
  const int64_t n = check_codes("dequantize", mode, m, w, scales);
  Dtype dt = issubdtype(x.dtype(), floating) ? x.dtype() : float32;
  Shape wshape = w.shape();
  wshape.back() = static_cast<int32_t>(n);
  int64_t inner = transpose ? n : (w.ndim() > 1 ? w.shape(-2) : -1);
  if (x.ndim() < 1 || x.shape(-1) != inner) {
    throw std::invalid_argument(
        "[quantized_matmul] the last axis of " + detail::describe(x) +
        " does not match the dequantized matrix " +
        detail::shape_str(wshape) + " with transpose=" +
        (transpose ? "true" : "false") + ".");
  }
  Stream st = to_stream(s);
  auto graph = [=](const array& x, const array& w, const array& scales) {
    array wd = dequantize_fp(w, scales, group_size, bits, mode, dt,
                             std::nullopt, st);
    return matmul(astype(x, dt, st), transpose ? swapaxes(wd, -1, -2, st) : wd,
                  st);
  };
  // A few rows of x read the codes (no weight-sized temporary); the graph
  // is the kernel's fallback (transformations).
  int64_t rows = x.shape(-1) > 0 ? int64_t(x.size()) / x.shape(-1) : 0;
  if (transpose && w.ndim() == 2 && rows > 0 &&
      matvec_takes(st, dt, rows, x.shape(-1), false)) {
    auto fallback = [=](std::vector<array> in) {
      return std::vector<array>{graph(in[0], in[1], in[2])};
    };
    Shape shape = x.shape();
    shape.back() = w.shape(0);
    return array(shape, dt,
                 std::make_shared<fast::QuantizedMatmulFp>(
                     st, std::move(fallback), group_size, bits),
                 {contiguous(astype(x, dt, st), false, st),
                  contiguous(w, false, st), contiguous(scales, false, st)});
  }
  return graph(x, w, scales);
}

namespace detail {

std::optional<array> gather_qmm_fp_in_place(const array& left,
                                            const array& w,
                                            const array& scales,
                                            const array& picks,
                                            int group_size, int bits,
                                            const std::string& mode,
                                            StreamOrDevice s) {
  Stream st = to_stream(s);
  const FpMode m = fp_mode("gather_qmm", mode, group_size, bits);
  const int64_t k = left.shape(-1);
  if (w.ndim() != 3 || k != int64_t(w.shape(-1)) * 32 / bits ||
      !matvec_takes(st, left.dtype(), left.shape(-2), k, true)) {
    return std::nullopt;
  }
  check_codes("gather_qmm", mode, m, w, scales);
  // The kernels read each pick's matrix through its index; the graph
  // (take the picks' codes, then the product) is their fallback.
  auto fallback = [=](std::vector<array> in) {
    array r = astype(in[3], int32, st);
    return std::vector<array>{quantized_matmul_fp(
        in[0], take(in[1], r, 0, st), take(in[2], r, 0, st), true,
        group_size, bits, mode, st)};
  };
  Shape shape = left.shape();
  shape.back() = w.shape(-2);
  return array(shape, left.dtype(),
               std::make_shared<fast::QuantizedMatmulFp>(
                   st, std::move(fallback), group_size, bits),
               {contiguous(left, false, st), contiguous(w, false, st),
                contiguous(scales, false, st),
                astype(picks, uint32, st)});
}

} // namespace detail

// ---- fp8 (e4m3: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits) ----

array to_fp8(const array& x, StreamOrDevice s) {
  if (!issubdtype(x.dtype(), floating)) {
    throw std::invalid_argument(
        "[to_fp8] Only real floating types are supported; got " +
        detail::describe(x) + ".");
  }
  // Exact integer arithmetic on float32's bits: the exponent and the top
  // three mantissa bits, rounded to nearest even on the twenty below.
  array f = astype(x, float32, s);
  array bits = view(f, uint32, s);
  array sign = astype(right_shift(bits, array(31u), s), uint8, s);
  array a = abs(f, s);
  // Saturate (NaN and infinities too, as MLX's conversion does).
  a = where(logical_or(isnan(a, s), greater(a, array(448.0f), s), s),
            array(448.0f), a, s);
  array ab = view(a, uint32, s);
  array e = subtract(astype(right_shift(ab, array(23u), s), int32, s),
                     array(127), s);
  array m = bitwise_and(ab, array(0x7fffffu), s);
  array q = right_shift(m, array(20u), s);
  array rest = bitwise_and(m, array(0xfffffu), s);
  array up = logical_or(
      greater(rest, array(0x80000u), s),
      logical_and(equal(rest, array(0x80000u), s),
                  equal(bitwise_and(q, array(1u), s), array(1u), s), s),
      s);
  // q + up may reach 8: the code's carry into the exponent is exact.
  array normal = add(left_shift(astype(add(e, array(7), s), uint32, s),
                                array(3u), s),
                     add(q, astype(up, uint32, s), s), s);
  // Below 2^-6: multiples of 2^-9, rounded to nearest even (8 is the
  // smallest normal's code).
  array sub = astype(round(multiply(a, array(512.0f), s), 0, s), uint32, s);
  array code = where(less(a, array(0.015625f), s), sub, normal, s);
  return bitwise_or(astype(code, uint8, s),
                    left_shift(sign, array(uint8_t(7)), s), s);
}

array from_fp8(const array& x, Dtype dtype, StreamOrDevice s) {
  if (x.dtype() != uint8) {
    throw std::invalid_argument("[from_fp8] Input must have type uint8; got " +
                                detail::describe(x) + ".");
  }
  if (!issubdtype(dtype, floating)) {
    throw std::invalid_argument("[from_fp8] dtype must be a float type; got " +
                                dtype_name(dtype) + ".");
  }
  // Every code's value, made once: sign, exponent and mantissa fields.
  std::vector<float> table(256);
  for (int c = 0; c < 256; ++c) {
    int e = (c >> 3) & 0xf, q = c & 7;
    float v = e == 0 ? std::ldexp(static_cast<float>(q), -9)
                     : std::ldexp(1.0f + q / 8.0f, e - 7);
    if ((c & 0x7f) == 0x7f) v = std::numeric_limits<float>::quiet_NaN();
    table[c] = c & 0x80 ? -v : v;
  }
  array values = astype(array(table, Shape{256}, float32), dtype, s);
  return take(values, astype(x, uint32, s), 0, s);
}

} // namespace kiln
