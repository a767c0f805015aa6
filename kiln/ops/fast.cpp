#include "kiln/ops/fast.h"

#include <cmath>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fast_impl.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

using kiln::detail::describe;
using kiln::detail::invalid;

namespace detail {

Dtype acc_dtype(Dtype d) { return d == float64 ? float64 : float32; }

} // namespace detail

namespace {

// A 1-d parameter over x's last axis (weight or bias), checked by name.
void check_param(const char* op, const char* what, const array& x,
                 const array& p) {
  if (p.ndim() != 1 || p.shape(0) != x.shape(-1)) {
    invalid(op, std::string(what) + " must be 1-d with " +
                    std::to_string(x.shape(-1)) +
                    " elements (the last axis of " + describe(x) + "); got " +
                    describe(p) + ".");
  }
}

void check_input(const char* op, const array& x) {
  if (x.ndim() == 0) {
    invalid(op, "x must have at least one dimension; got " + describe(x) + ".");
  }
}

void check_floating(const char* op, Dtype dt, const std::string& inputs) {
  if (!is_floating_point(dt)) {
    invalid(op, "needs floating inputs; got " + inputs + " (result type " +
                    dtype_name(dt) + ").");
  }
}

// Host-built constant (rows x cols) of dtype dt from a row-major vector.
array constant(const std::vector<double>& v, int rows, int cols, Dtype dt) {
  return array(v.begin(), {rows, cols}, dt);
}

} // namespace

array rms_norm(const array& x, const std::optional<array>& weight, float eps,
               StreamOrDevice s_) {
  check_input("rms_norm", x);
  if (weight) check_param("rms_norm", "weight", x, *weight);
  Dtype out_type =
      weight ? promote_types(x.dtype(), weight->dtype()) : x.dtype();
  check_floating("rms_norm", out_type,
                 describe(x) + (weight ? " and " + describe(*weight) : ""));
  auto s = to_stream(s_);
  auto fallback = [eps, out_type, s](std::vector<array> in) {
    Dtype acc = detail::acc_dtype(out_type);
    auto x = astype(in[0], acc, s);
    auto ms = add(mean(square(x, s), -1, true, s), array(eps, acc), s);
    x = astype(multiply(x, rsqrt(ms, s), s), out_type, s);
    return std::vector<array>{multiply(x, in[1], s)};
  };
  auto w = weight ? astype(*weight, out_type, s) : array(1, out_type);
  return array(x.shape(), out_type,
               std::make_shared<RMSNorm>(s, std::move(fallback), eps),
               {astype(x, out_type, s), w});
}

array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps,
                 StreamOrDevice s_) {
  check_input("layer_norm", x);
  if (weight) check_param("layer_norm", "weight", x, *weight);
  if (bias) check_param("layer_norm", "bias", x, *bias);
  Dtype out_type = x.dtype();
  std::string names = describe(x);
  for (auto* p : {&weight, &bias}) {
    if (*p) {
      out_type = promote_types(out_type, (*p)->dtype());
      names += ", " + describe(**p);
    }
  }
  check_floating("layer_norm", out_type, names);
  auto s = to_stream(s_);
  auto fallback = [eps, out_type, s](std::vector<array> in) {
    Dtype acc = detail::acc_dtype(out_type);
    auto x = astype(in[0], acc, s);
    auto xc = subtract(x, mean(x, -1, true, s), s);
    auto var = mean(square(xc, s), -1, true, s);
    x = multiply(xc, rsqrt(add(var, array(eps, acc), s), s), s);
    x = astype(x, out_type, s);
    return std::vector<array>{add(multiply(x, in[1], s), in[2], s)};
  };
  auto w = weight ? astype(*weight, out_type, s) : array(1, out_type);
  auto b = bias ? astype(*bias, out_type, s) : array(0, out_type);
  return array(x.shape(), out_type,
               std::make_shared<LayerNorm>(s, std::move(fallback), eps),
               {astype(x, out_type, s), w, b});
}

namespace {

// Rotation as x * cos + (x @ P) * sin over all D features, with P the signed
// permutation pairing features; features past dims get angle 0. It avoids
// slicing but builds (..., D, D) products: fine for transformations, which
// is all a fallback is for.
std::vector<array> rope_fallback(std::vector<array> in, int dims,
                                 bool traditional, float base, float scale,
                                 Stream s) {
  const array& x = in[0];
  Dtype t = x.dtype(), acc = detail::acc_dtype(t);
  int nd = static_cast<int>(x.ndim());
  int D = x.shape(-1), T = x.shape(-2), half = dims / 2;
  auto off = astype(in[1], acc, s);
  if (off.size() > 1) {
    Shape oshape(nd - 1, 1);
    oshape[0] = x.shape(0);
    off = reshape(off, oshape, s);
  } else {
    off = reshape(off, {}, s);
  }
  auto pos =
      multiply(add(arange(0.0, T, acc, s), off, s), array(scale, acc), s);
  auto inv =
      in.size() == 3
          ? reciprocal(astype(in[2], acc, s), s)
          : exp(multiply(arange(0.0, -half, -1.0, acc, s),
                         array(std::log(static_cast<double>(base)) / half, acc),
                         s),
                s);
  std::vector<double> spread(half * D, 0.0), perm(D * D, 0.0);
  for (int i = 0; i < dims; ++i) {
    int j = traditional ? i / 2 : i % half;
    spread[j * D + i] = 1;
    // y_i = -x_partner for the first of a pair, +x_partner for the second.
    bool first = traditional ? i % 2 == 0 : i < half;
    int partner =
        traditional ? (first ? i + 1 : i - 1) : (first ? i + half : i - half);
    perm[partner * D + i] = first ? -1 : 1;
  }
  auto inv_full =
      reshape(matmul(reshape(inv, {1, half}, s),
                                    constant(spread, half, D, acc), s),
              {D}, s);
  auto theta = multiply(expand_dims(pos, -1, s), inv_full, s);
  auto c = astype(cos(theta, s), t, s);
  auto sn = astype(sin(theta, s), t, s);
  auto rotated = matmul(x, constant(perm, D, D, t), s);
  return {add(multiply(x, c, s), multiply(rotated, sn, s), s)};
}

} // namespace

array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, const array& offset,
           const std::optional<array>& freqs, StreamOrDevice s_) {
  if (x.ndim() < 3) {
    invalid("rope", "x must have at least 3 dimensions (B, *, T, D); got " +
                        describe(x) + ".");
  }
  if (!is_floating_point(x.dtype())) {
    invalid("rope", "x must be floating; got " + describe(x) + ".");
  }
  if (offset.ndim() > 1 || (offset.size() != 1 &&
                            offset.size() != static_cast<size_t>(x.shape(0)))) {
    invalid("rope",
            "offset must be a scalar or hold one value per batch "
            "entry (" +
                std::to_string(x.shape(0)) + "); got " + describe(offset) +
                ".");
  }
  if (!is_integral(offset.dtype())) {
    invalid("rope", "offset must be an integer; got " + describe(offset) + ".");
  }
  if (dims <= 0 || dims % 2 != 0 || dims > x.shape(-1)) {
    invalid("rope", "dims must be positive, even and at most " +
                        std::to_string(x.shape(-1)) + " (x is " + describe(x) +
                        "); got " + std::to_string(dims) + ".");
  }
  if (freqs.has_value() == base.has_value()) {
    invalid("rope", "exactly one of base and freqs must have a value.");
  }
  if (freqs && (freqs->ndim() != 1 || freqs->shape(0) != dims / 2 ||
                !is_floating_point(freqs->dtype()))) {
    invalid("rope", "freqs must be floating and 1-d with " +
                        std::to_string(dims / 2) + " elements; got " +
                        describe(*freqs) + ".");
  }
  auto s = to_stream(s_);
  std::vector<array> inputs = {x, astype(offset, int32, s)};
  if (freqs) inputs.push_back(astype(*freqs, float32, s));
  float b = base.value_or(1.0f);
  auto fallback = [dims, traditional, b, scale, s](std::vector<array> in) {
    return rope_fallback(std::move(in), dims, traditional, b, scale, s);
  };
  return array(x.shape(), x.dtype(),
               std::make_shared<RoPE>(s, std::move(fallback), dims, traditional,
                                      b, scale),
               std::move(inputs));
}

array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, int offset,
           const std::optional<array>& freqs, StreamOrDevice s) {
  return rope(x, dims, traditional, base, scale, array(offset, int32), freqs,
              s);
}

} // namespace kiln::fast
