#include "kiln/ops/random.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/random.h"

namespace kiln::random {

using detail::describe;
using detail::invalid;
using detail::shape_str;

namespace {

// Rows of a (2, 2) array of keys without a slice op: keep one row, zero the
// other and take the maximum over rows (exact for uint32).
array key_row(const array& keys, int row, Stream s) {
  array mask({row == 0, row == 1}, {2, 1});
  return max(where(mask, keys, array(0u, uint32), s), 0, false, s);
}

void check_shape(const char* op, const Shape& shape) {
  for (auto d : shape) {
    if (d < 0)
      invalid(op, "negative dimension in shape " + shape_str(shape) + ".");
  }
}

// True when `from` broadcasts to exactly `to`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[i + off]) return false;
  }
  return true;
}

// The float32 value just below 1 in dtype, so samples stay below high.
float below_one(Dtype dtype) {
  if (dtype == float16) return 0.99951171875f; // 0x3bff
  if (dtype == bfloat16) return 0.99609375f;   // 0x3f7f
  return std::nextafter(1.0f, 0.0f);
}

array float32_erf(const array& x, bool inverse, Stream s) {
  return array(x.shape(), x.dtype(), std::make_shared<Float32Erf>(s, inverse),
               {x});
}

} // namespace

// ---- keys and state ---------------------------------------------------------

KeyState::KeyState(uint64_t seed) : key_(key(seed)) {}

array KeyState::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return key_;
}

void KeyState::set(array key) {
  if (key.dtype() != uint32 || key.shape() != Shape{2}) {
    invalid("random.state", "a key is a uint32 array of shape (2,); got " +
                                describe(key) + ".");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  key_ = std::move(key);
}

void KeyState::seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  key_ = key(seed);
}

array KeyState::next() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [first, second] = split(key_);
  key_ = std::move(first);
  return second;
}

KeyState& state() {
  static KeyState ks(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count()));
  return ks;
}

array key(uint64_t seed) {
  return array({static_cast<uint32_t>(seed >> 32),
                static_cast<uint32_t>(seed & 0xffffffffu)});
}

void seed(uint64_t seed) { state().seed(seed); }

array bits(const Shape& shape, int width, const std::optional<array>& key,
           StreamOrDevice s) {
  check_shape("bits", shape);
  if (width != 1 && width != 2 && width != 4) {
    invalid("bits", "width must be 1, 2 or 4 bytes; got " +
                        std::to_string(width) + ".");
  }
  if (key && (key->dtype() != uint32 || key->shape() != Shape{2})) {
    invalid("bits", "a key is a uint32 array of shape (2,); got " +
                        describe(*key) + ".");
  }
  Dtype dt = width == 4 ? uint32 : width == 2 ? uint16 : uint8;
  auto k = key ? *key : state().next();
  return array(shape, dt,
               std::make_shared<RandomBits>(to_stream(s), shape, width), {k});
}

std::pair<array, array> split(const array& key, StreamOrDevice s) {
  auto keys = split(key, 2, s);
  auto stream = to_stream(s);
  return {key_row(keys, 0, stream), key_row(keys, 1, stream)};
}

array split(const array& key, int num, StreamOrDevice s) {
  if (num < 0)
    invalid("split",
            "num must be non-negative; got " + std::to_string(num) + ".");
  if (key.dtype() != uint32 || key.shape() != Shape{2}) {
    invalid("split", "a key is a uint32 array of shape (2,); got " +
                         describe(key) + ".");
  }
  return bits({num, 2}, 4, key, s);
}

// ---- continuous distributions
// ------------------------------------------------

array uniform(const array& low, const array& high, const Shape& shape,
              Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(dtype)) {
    invalid("uniform", "dtype must be a real floating type; got " +
                           dtype_name(dtype) + ".");
  }
  check_shape("uniform", shape);
  auto bshape = detail::broadcast_shapes(low.shape(), high.shape(), "uniform");
  if (!broadcasts_to(bshape, shape)) {
    invalid("uniform", "low (" + describe(low) + ") and high (" +
                           describe(high) + ") do not broadcast to shape " +
                           shape_str(shape) + ".");
  }
  auto stream = to_stream(s);
  auto lo = astype(low, dtype, stream);
  auto range = subtract(astype(high, dtype, stream), lo, stream);
  // bits / (2^32 - 1) in float32, capped below 1 so samples stay below high.
  auto u = divide(bits(shape, 4, key, stream),
                  array(static_cast<float>(UINT32_MAX)), stream);
  u = astype(minimum(u, array(below_one(dtype)), stream), dtype, stream);
  return add(multiply(range, u, stream), lo, stream);
}

array uniform(const Shape& shape, Dtype dtype, const std::optional<array>& key,
              StreamOrDevice s) {
  return uniform(array(0.0f, dtype), array(1.0f, dtype), shape, dtype, key, s);
}

array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale, const std::optional<array>& key,
             StreamOrDevice s) {
  if (dtype == complex64) {
    // Real and imaginary parts each of variance 1/2 (as MLX): erfinv of a
    // trailing pair of uniforms, viewed as one complex value.
    check_shape("normal", shape);
    auto stream = to_stream(s);
    auto pair = shape;
    pair.push_back(2);
    auto u = uniform(array(std::nextafter(-1.0f, 0.0f)), array(1.0f), pair,
                     float32, key, stream);
    auto z = squeeze(view(float32_erf(u, true, stream), complex64, stream),
                     -1, stream);
    if (scale) z = multiply(*scale, z, stream);
    if (loc) z = add(*loc, z, stream);
    return z;
  }
  if (!is_floating_point(dtype)) {
    invalid("normal", "dtype must be a real floating type or complex64; got " +
                          dtype_name(dtype) + ".");
  }
  check_shape("normal", shape);
  auto stream = to_stream(s);
  // Inverse CDF: sqrt(2) * erfinv(u) for u uniform in (-1, 1).
  auto u = uniform(array(std::nextafter(-1.0f, 0.0f)), array(1.0f), shape,
                   float32, key, stream);
  auto samples = astype(float32_erf(u, true, stream), dtype, stream);
  auto applied_scale = array(std::sqrt(2.0), dtype);
  if (scale) {
    applied_scale =
        multiply(applied_scale, astype(*scale, dtype, stream), stream);
  }
  samples = multiply(applied_scale, samples, stream);
  if (loc) samples = add(astype(*loc, dtype, stream), samples, stream);
  return samples;
}

array normal(const Shape& shape, Dtype dtype, float loc, float scale,
             const std::optional<array>& key, StreamOrDevice s) {
  auto loc_ = loc == 0 ? std::nullopt : std::make_optional(array(loc, dtype));
  auto scale_ =
      scale == 1 ? std::nullopt : std::make_optional(array(scale, dtype));
  return normal(shape, dtype, loc_, scale_, key, s);
}

array truncated_normal(const array& lower, const array& upper,
                       const Shape& shape, Dtype dtype,
                       const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(dtype)) {
    invalid("truncated_normal", "dtype must be a real floating type; got " +
                                    dtype_name(dtype) + ".");
  }
  check_shape("truncated_normal", shape);
  auto bshape = detail::broadcast_shapes(lower.shape(), upper.shape(),
                                         "truncated_normal");
  if (!broadcasts_to(bshape, shape)) {
    invalid("truncated_normal",
            "lower (" + describe(lower) + ") and upper (" + describe(upper) +
                ") do not broadcast to shape " + shape_str(shape) + ".");
  }
  auto stream = to_stream(s);
  // Uniform between the bounds' CDF values, mapped back through erfinv.
  auto sqrt2 = array(std::sqrt(2.0), dtype);
  auto lo = astype(lower, dtype, stream);
  auto hi = astype(upper, dtype, stream);
  auto a = float32_erf(divide(lo, sqrt2, stream), false, stream);
  auto b = float32_erf(divide(hi, sqrt2, stream), false, stream);
  auto u = uniform(a, b, shape, dtype, key, stream);
  auto out = multiply(sqrt2, float32_erf(u, true, stream), stream);
  return maximum(minimum(hi, out, stream), lo, stream);
}

array truncated_normal(const array& lower, const array& upper, Dtype dtype,
                       const std::optional<array>& key, StreamOrDevice s) {
  auto shape = detail::broadcast_shapes(lower.shape(), upper.shape(),
                                        "truncated_normal");
  return truncated_normal(lower, upper, shape, dtype, key, s);
}

array gumbel(const Shape& shape, Dtype dtype, const std::optional<array>& key,
             StreamOrDevice s) {
  if (!is_floating_point(dtype)) {
    invalid("gumbel", "dtype must be a real floating type; got " +
                          dtype_name(dtype) + ".");
  }
  auto stream = to_stream(s);
  auto u = uniform(shape, dtype, key, stream);
  return negative(log(negative(log(u, stream), stream), stream), stream);
}

array laplace(const Shape& shape, Dtype dtype, float loc, float scale,
              const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(dtype)) {
    invalid("laplace", "dtype must be a real floating type; got " +
                           dtype_name(dtype) + ".");
  }
  check_shape("laplace", shape);
  auto stream = to_stream(s);
  // Inverse CDF in float32 (as MLX): sign(u) log(1 - |u|) for u uniform in
  // (-1, 1), then cast, scaled and shifted in dtype.
  auto u = uniform(array(std::nextafter(-1.0f, 0.0f)), array(1.0f), shape,
                   float32, key, stream);
  auto x = multiply(sign(u, stream),
                    log1p(negative(abs(u, stream), stream), stream), stream);
  x = astype(x, dtype, stream);
  if (scale != 1) x = multiply(x, array(scale, dtype), stream);
  if (loc != 0) x = add(x, array(loc, dtype), stream);
  return x;
}

array multivariate_normal(const array& mean, const array& cov,
                          const Shape& shape, Dtype dtype,
                          const std::optional<array>& key, StreamOrDevice s) {
  const char* op = "multivariate_normal";
  if (dtype != float32) {
    invalid(op, "dtype must be float32; got " + dtype_name(dtype) + ".");
  }
  if (mean.ndim() < 1 || cov.ndim() < 2) {
    invalid(op, "mean must have at least 1 dimension and cov at least 2; got " +
                    describe(mean) + " and " + describe(cov) + ".");
  }
  int n = mean.shape(-1);
  if (cov.shape(-1) != n || cov.shape(-2) != n) {
    invalid(op,
            "cov must be (..., n, n) with n the size of mean's last axis; "
            "got " +
                describe(mean) + " and " + describe(cov) + ".");
  }
  check_shape(op, shape);
  Shape mean_batch(mean.shape().begin(), mean.shape().end() - 1);
  Shape cov_batch(cov.shape().begin(), cov.shape().end() - 2);
  Shape batch = detail::broadcast_shapes(mean_batch, cov_batch, op);
  Shape out_shape = shape.empty() ? batch : shape;
  if (!broadcasts_to(batch, out_shape)) {
    invalid(op, "shape " + shape_str(shape) +
                    " is not broadcast compatible with the batch shapes of "
                    "mean and cov (" +
                    describe(mean) + ", " + describe(cov) + ").");
  }
  auto stream = to_stream(s);
  out_shape.push_back(n);
  // z @ C^(1/2) with the square root U sqrt(S) V^T from the SVD of cov.
  auto c = astype(cov, dtype, stream);
  auto f = linalg::svd(c, true, stream);
  auto root = matmul(
      multiply(f[0], expand_dims(sqrt(f[1], stream), -2, stream), stream), f[2],
      stream);
  auto z = normal(out_shape, dtype, key, stream);
  auto x =
      squeeze(matmul(expand_dims(z, -2, stream), root, stream), -2, stream);
  return add(astype(mean, dtype, stream), x, stream);
}

// ---- discrete distributions
// --------------------------------------------------

array randint(const array& low, const array& high, const Shape& shape,
              Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  if (is_inexact(dtype)) {
    invalid("randint", "dtype must be an integer type or bool; got " +
                           dtype_name(dtype) + ".");
  }
  auto stream = to_stream(s);
  try {
    detail::broadcast_shapes(low.shape(), high.shape(), "randint");
  } catch (const std::invalid_argument&) {
    invalid("randint", "low (" + describe(low) + ") and high (" +
                           describe(high) + ") cannot be broadcast together.");
  }
  // MLX 0.32 draws in float32, floors, then clips to [low, high - 1] in the
  // output dtype; the clip order matters for bounds that wrap in dtype.
  auto u = uniform(low, high, shape, float32, key, stream);
  auto out = astype(floor(u, stream), dtype, stream);
  auto h = high.dtype() == bool_ ? astype(high, int32, stream) : high;
  auto top = subtract(h, array(1, h.dtype()), stream);
  out = minimum(out, astype(top, dtype, stream), stream);
  return maximum(out, astype(low, dtype, stream), stream);
}

array bernoulli(const array& p, const Shape& shape,
                const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(p.dtype())) {
    invalid("bernoulli",
            "p must be a floating array; got " + describe(p) + ".");
  }
  check_shape("bernoulli", shape);
  if (!broadcasts_to(p.shape(), shape)) {
    invalid("bernoulli", "p (" + describe(p) +
                             ") does not broadcast to shape " +
                             shape_str(shape) + ".");
  }
  auto stream = to_stream(s);
  // bits < p * (just above 2^32 - 1): p >= 1 is always true, p <= 0 never.
  auto upper = array(std::nextafter(static_cast<float>(UINT32_MAX),
                                    std::numeric_limits<float>::max()));
  return less(bits(shape, 4, key, stream), multiply(p, upper, stream), stream);
}

array bernoulli(const array& p, const std::optional<array>& key,
                StreamOrDevice s) {
  return bernoulli(p, p.shape(), key, s);
}

array bernoulli(const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli(array(0.5f), key, s);
}

namespace {

// Gumbel-max sampling: argmax over the category axis, which sits at
// `offset` once the sample shape is laid out around it.
// One distribution drawn from many times (a sampler's single prompt): the
// inverse of its CDF at uniform points, O(n + samples) memory where the
// Gumbel-max trick takes O(n * samples). The same draws as MLX from 0.32.1:
// u scaled by the total weight, found in the exclusive running sum.
array inverse_cdf_draws(const array& logits, const Shape& shape,
                        const std::optional<array>& key, Stream s) {
  Dtype dt = promote_types(logits.dtype(), float32);
  array x = astype(logits, dt, s);
  array top = max(x, false, s);
  // A +inf logit makes exp(x - top) NaN: the draw is then uniform over the
  // entries equal to the top.
  array w = where(isinf(top, s), astype(equal(x, top, s), dt, s),
                  exp(subtract(x, top, s), s), s);
  array before = cumsum(w, 0, false, false, s);
  array u = multiply(uniform(shape, float32, key, s), sum(w, false, s), s);
  return subtract(searchsorted(before, u, "right", s), array(1u, uint32), s);
}

array categorical_impl(const array& logits, int axis, const Shape& shape,
                       const std::optional<array>& key, Stream s) {
  int n = logits.shape(axis);
  if (n > 0 && logits.size() == static_cast<size_t>(n) && !shape.empty()) {
    return inverse_cdf_draws(reshape(logits, {n}, s), shape, key, s);
  }
  auto gshape = shape;
  int offset = axis + static_cast<int>(shape.size()) -
               static_cast<int>(logits.ndim()) + 1;
  gshape.insert(gshape.begin() + offset, logits.shape(axis));
  auto g = gumbel(gshape, float32, key, s);
  return argmax(add(g, logits, s), offset, false, s);
}

void check_logits(const array& logits) {
  if (logits.ndim() == 0) {
    invalid("categorical", "logits must have at least one dimension; got " +
                               describe(logits) + ".");
  }
  if (!is_floating_point(logits.dtype()) && !is_integral(logits.dtype())) {
    invalid("categorical",
            "logits must be real numbers; got " + describe(logits) + ".");
  }
}

} // namespace

array categorical(const array& logits, int axis, const Shape& shape,
                  const std::optional<array>& key, StreamOrDevice s) {
  check_logits(logits);
  check_shape("categorical", shape);
  axis = detail::normalize_axis(axis, static_cast<int>(logits.ndim()),
                                "categorical");
  auto reduced = logits.shape();
  reduced.erase(reduced.begin() + axis);
  if (!broadcasts_to(reduced, shape)) {
    invalid("categorical", "shape " + shape_str(shape) +
                               " is not broadcast compatible with the reduced "
                               "logits shape " +
                               shape_str(reduced) + ".");
  }
  return categorical_impl(logits, axis, shape, key, to_stream(s));
}

array categorical(const array& logits, int axis, int num_samples,
                  const std::optional<array>& key, StreamOrDevice s) {
  check_logits(logits);
  if (num_samples < 0) {
    invalid("categorical", "num_samples must be non-negative; got " +
                               std::to_string(num_samples) + ".");
  }
  axis = detail::normalize_axis(axis, static_cast<int>(logits.ndim()),
                                "categorical");
  auto stream = to_stream(s);
  auto l = expand_dims(logits, -1, stream);
  auto shape = l.shape();
  shape.erase(shape.begin() + axis);
  shape.back() = num_samples;
  return categorical_impl(l, axis, shape, key, stream);
}

array categorical(const array& logits, int axis,
                  const std::optional<array>& key, StreamOrDevice s) {
  check_logits(logits);
  axis = detail::normalize_axis(axis, static_cast<int>(logits.ndim()),
                                "categorical");
  auto shape = logits.shape();
  shape.erase(shape.begin() + axis);
  return categorical_impl(logits, axis, shape, key, to_stream(s));
}

// ---- permutations
// ------------------------------------------------------------

array permutation(int n, const std::optional<array>& key, StreamOrDevice s) {
  if (n < 0)
    invalid("permutation",
            "n must be non-negative; got " + std::to_string(n) + ".");
  return permutation(arange(0.0, n, uint32, s), 0, key, s);
}

array permutation(const array& x, int axis, const std::optional<array>& key,
                  StreamOrDevice s) {
  if (x.ndim() == 0) {
    invalid("permutation", "cannot permute a 0-d array (" + describe(x) + ").");
  }
  axis =
      detail::normalize_axis(axis, static_cast<int>(x.ndim()), "permutation");
  auto stream = to_stream(s);
  // As MLX's: x taken along axis in the (stable) order that sorts one
  // random uint32 per position; every device sorts and gathers, and the
  // gradients and vmap are take's and argsort's.
  auto keys = bits({x.shape(axis)}, 4, key, stream);
  return take(x, argsort(keys, 0, stream), axis, stream);
}

} // namespace kiln::random
