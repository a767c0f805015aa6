#include "kiln/ops/reduction.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/reduction.h"
#include "kiln/primitives/softmax.h"

namespace kiln {

using detail::invalid;

namespace {

std::vector<int> all_axes(const array& a) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

Shape reduced_shape(const array& a, const std::vector<int>& axes) {
  Shape s = a.shape();
  for (int ax : axes) s[ax] = 1;
  return s;
}

array squeeze_unless(const array& out, const std::vector<int>& axes,
                     bool keepdims, StreamOrDevice s) {
  return keepdims ? out : squeeze(out, axes, s);
}

// complex64 extremes as MLX orders values: by real part, then imaginary
// part; a NaN in either part counts as the extreme (the first NaN wins),
// as for real values. Composed of real reductions, so every device runs
// them.

/** The first position along axis of the extreme (uint32, axis kept). */
array complex_arg_extreme(const array& a, int axis, bool is_max,
                          StreamOrDevice s) {
  auto extreme = [&](const array& x) {
    return is_max ? max(x, axis, true, s) : min(x, axis, true, s);
  };
  array re = real(a, s), im = imag(a, s);
  array on_real = equal(re, extreme(re), s);
  float beyond = is_max ? -std::numeric_limits<float>::infinity()
                        : std::numeric_limits<float>::infinity();
  array best_imag = extreme(where(on_real, im, array(beyond), s));
  array hit = logical_and(on_real, equal(im, best_imag, s), s);
  array nan = logical_or(isnan(re, s), isnan(im, s), s);
  return where(any(nan, axis, true, s), argmax(nan, axis, true, s),
               argmax(hit, axis, true, s), s);
}

/** max/min of complex values over axes (none of zero size). */
array complex_extreme(const array& a, const std::vector<int>& axes,
                      bool keepdims, bool is_max, StreamOrDevice s) {
  // The reduced axes last, flattened into one.
  std::vector<int> order;
  Shape kept;
  for (int ax = 0; ax < static_cast<int>(a.ndim()); ++ax) {
    if (std::find(axes.begin(), axes.end(), ax) == axes.end()) {
      order.push_back(ax);
      kept.push_back(a.shape(ax));
    }
  }
  order.insert(order.end(), axes.begin(), axes.end());
  Shape flat = kept;
  flat.push_back(-1);
  array lines = reshape(transpose(a, order, s), flat, s);
  int last = static_cast<int>(kept.size());
  array picked = take_along_axis(
      lines, complex_arg_extreme(lines, last, is_max, s), last, s);
  return reshape(picked, keepdims ? reduced_shape(a, axes) : kept, s);
}

array reduce(const char* op, const array& a, const std::vector<int>& axes_in,
             bool keepdims, Reduce::Type type, Dtype out_dtype,
             StreamOrDevice s) {
  auto axes = detail::normalize_axes(axes_in, static_cast<int>(a.ndim()), op);
  if (type == Reduce::Max || type == Reduce::Min) {
    for (int ax : axes) {
      if (a.shape(ax) == 0) {
        invalid(op, "cannot reduce a zero-size axis of an array of shape " +
                        detail::shape_str(a.shape()) + " (no identity).");
      }
    }
    if (is_complex(a.dtype()) && !axes.empty()) {
      return complex_extreme(a, axes, keepdims, type == Reduce::Max, s);
    }
  }
  if (axes.empty()) return astype(a, out_dtype, s);
  auto p = std::make_shared<Reduce>(to_stream(s), type, axes);
  array out(reduced_shape(a, axes), out_dtype, std::move(p), {a});
  return squeeze_unless(out, axes, keepdims, s);
}

} // namespace

#define KILN_REDUCTION_FORMS(name)                                            \
  array name(const array& a, bool keepdims, StreamOrDevice s) {               \
    return name(a, all_axes(a), keepdims, s);                                 \
  }                                                                           \
  array name(const array& a, int axis, bool keepdims, StreamOrDevice s) {     \
    return name(a, std::vector<int>{axis}, keepdims, s);                      \
  }
KILN_REDUCTION_FORMS(sum)
KILN_REDUCTION_FORMS(prod)
KILN_REDUCTION_FORMS(mean)
KILN_REDUCTION_FORMS(max)
KILN_REDUCTION_FORMS(min)
KILN_REDUCTION_FORMS(all)
KILN_REDUCTION_FORMS(any)
KILN_REDUCTION_FORMS(logsumexp)
#undef KILN_REDUCTION_FORMS

array sum(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce("sum", a, axes, keepdims, Reduce::Sum, sum_dtype(a.dtype()), s);
}

array prod(const array& a, const std::vector<int>& axes, bool keepdims,
           StreamOrDevice s) {
  return reduce("prod", a, axes, keepdims, Reduce::Prod, sum_dtype(a.dtype()),
                s);
}

array max(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce("max", a, axes, keepdims, Reduce::Max, a.dtype(), s);
}

array min(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce("min", a, axes, keepdims, Reduce::Min, a.dtype(), s);
}

array all(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce("all", a, axes, keepdims, Reduce::And, bool_, s);
}

array any(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce("any", a, axes, keepdims, Reduce::Or, bool_, s);
}

namespace {
// The divisor of mean and var as a node (see NumberOfElements).
array number_of_elements(const array& a, const std::vector<int>& axes, int ddof,
                         Dtype dt, const char* op, StreamOrDevice s) {
  auto ax = detail::normalize_axes(axes, static_cast<int>(a.ndim()), op);
  std::sort(ax.begin(), ax.end());
  auto p =
      std::make_shared<NumberOfElements>(to_stream(s), std::move(ax), ddof, dt);
  return array(Shape{}, dt, std::move(p), {a});
}
} // namespace

namespace {
// The dtype mean and var compute in: float32 for 16-bit floats, whose sums
// and element counts overflow past 65,504 (float16), as NumPy and PyTorch
// do; the result is rounded once to the input's float dtype.
Dtype statistics_dtype(Dtype dt) {
  return dt == float16 || dt == bfloat16 ? float32 : dt;
}
} // namespace

array mean(const array& a, const std::vector<int>& axes, bool keepdims,
           StreamOrDevice s) {
  Dtype dt = detail::at_least_float(a.dtype());
  Dtype acc = statistics_dtype(dt);
  auto total = sum(astype(a, acc, s), axes, keepdims, s);
  // A complex sum divides by a real count.
  Dtype count_dt = acc == complex64 ? float32 : acc;
  auto m = divide(total, number_of_elements(a, axes, 0, count_dt, "mean", s),
                  s);
  return astype(m, dt, s);
}

array var(const array& a, const std::vector<int>& axes, bool keepdims,
          int ddof, StreamOrDevice s) {
  Dtype dt = detail::at_least_float(a.dtype());
  Dtype acc = statistics_dtype(dt);
  auto x = astype(a, acc, s);
  auto mu = mean(x, axes, true, s);
  auto dev = subtract(x, mu, s);
  // Complex values vary by |x - mean|^2, a float32 (as NumPy and MLX).
  bool complex = acc == complex64;
  auto sq = square(complex ? abs(dev, s) : dev, s);
  auto denom = number_of_elements(a, axes, ddof, complex ? float32 : acc,
                                  "var", s);
  return astype(divide(sum(sq, axes, keepdims, s), denom, s),
                complex ? float32 : dt, s);
}

array var(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, all_axes(a), keepdims, ddof, s);
}

array var(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, std::vector<int>{axis}, keepdims, ddof, s);
}

array std(const array& a, const std::vector<int>& axes, bool keepdims,
          int ddof, StreamOrDevice s) {
  return sqrt(var(a, axes, keepdims, ddof, s), s);
}

array std(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, all_axes(a), keepdims, ddof, s);
}

array std(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, std::vector<int>{axis}, keepdims, ddof, s);
}

array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims,
                StreamOrDevice s) {
  if (a.size() == 0) invalid("logsumexp", "cannot reduce a zero-size array.");
  Dtype dt = detail::at_least_float(a.dtype());
  auto x = astype(a, dt, s);
  auto ax =
      detail::normalize_axes(axes, static_cast<int>(a.ndim()), "logsumexp");
  int nd = static_cast<int>(a.ndim());
  if (!is_complex(dt) && ax.size() == 1) {
    // One pass over each row (LogSumExp works on the last axis; another
    // axis moves last as a view). Several axes compose below: flattening
    // them would need a reshape, which shapeless compile cannot replay.
    if (ax[0] != nd - 1) x = moveaxis(x, ax[0], -1, s);
    Shape shape(x.shape().begin(), x.shape().end() - 1);
    array out(shape, dt, std::make_shared<LogSumExp>(to_stream(s)), {x});
    return keepdims ? expand_dims(out, ax[0], s) : out;
  }
  // Several axes, or complex: composed. Shift by the max (held
  // constant for gradients); an infinite max would give inf - inf, so it
  // shifts by 0 instead.
  auto m = stop_gradient(max(x, axes, true, s), s);
  m = where(isinf(m, s), zeros_like(m, s), m, s);
  auto out = add(log(sum(exp(subtract(x, m, s), s), axes, true, s), s), m, s);
  return squeeze_unless(out, ax, keepdims, s);
}

namespace {
array arg_reduce(const char* op, const array& a, int axis, bool keepdims,
                 ArgReduce::Type type, StreamOrDevice s) {
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), op);
  if (a.shape(axis) == 0) {
    invalid(op, "cannot take the arg-extreme of a zero-size axis (shape " +
                    detail::shape_str(a.shape()) + ").");
  }
  if (is_complex(a.dtype())) {
    array out = complex_arg_extreme(a, axis, type == ArgReduce::ArgMax, s);
    return squeeze_unless(out, {axis}, keepdims, s);
  }
  auto p = std::make_shared<ArgReduce>(to_stream(s), type, axis);
  array out(reduced_shape(a, {axis}), uint32, std::move(p), {a});
  return squeeze_unless(out, {axis}, keepdims, s);
}

// The flat index of the extreme of an array too long for one dimension: the
// extreme of each row of an (A, B) view, then the first row holding the
// overall extreme (that row's own arg-extreme is then the first overall).
array arg_reduce_long(const char* op, const array& a, ArgReduce::Type type,
                      StreamOrDevice s) {
  if (a.size() > (size_t{1} << 32)) {
    invalid(op, "the flat index of an array of shape " +
                    detail::shape_str(a.shape()) +
                    " does not fit the uint32 result.");
  }
  int64_t rows = 1;
  size_t k = 0;
  while (a.size() / rows > INT32_MAX) rows *= a.shape(k++);
  int64_t cols = static_cast<int64_t>(a.size()) / rows;
  if (rows > INT32_MAX || cols > INT32_MAX) {
    invalid(op, "cannot split shape " + detail::shape_str(a.shape()) +
                    " into rows and columns of fewer than 2^31 elements.");
  }
  auto x = reshape(a, {static_cast<int32_t>(rows), static_cast<int32_t>(cols)},
                   s);
  auto in_row = arg_reduce(op, x, 1, true, type, s); // (rows, 1)
  auto extremes = take_along_axis(x, in_row, 1, s);   // (rows, 1)
  auto row = arg_reduce(op, extremes, 0, true, type, s);
  auto col = take_along_axis(in_row, row, 0, s);
  auto flat = add(multiply(astype(row, uint64, s), array(uint64_t(cols)), s),
                  astype(col, uint64, s), s);
  return astype(reshape(flat, {}, s), uint32, s);
}

array arg_reduce_flat(const char* op, const array& a, bool keepdims,
                      ArgReduce::Type type, StreamOrDevice s) {
  auto out = a.size() > INT32_MAX
                 ? arg_reduce_long(op, a, type, s)
                 : arg_reduce(op, reshape(a, {-1}, s), 0, false, type, s);
  return keepdims ? reshape(out, Shape(a.ndim(), 1), s) : out;
}
} // namespace

array argmax(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_reduce_flat("argmax", a, keepdims, ArgReduce::ArgMax, s);
}
array argmax(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce("argmax", a, axis, keepdims, ArgReduce::ArgMax, s);
}
array argmin(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_reduce_flat("argmin", a, keepdims, ArgReduce::ArgMin, s);
}
array argmin(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce("argmin", a, axis, keepdims, ArgReduce::ArgMin, s);
}

namespace {
array scan(const char* op, const array& a, int axis, bool reverse,
           bool inclusive, Scan::Type type, StreamOrDevice s) {
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), op);
  Dtype dt = a.dtype();
  if (type == Scan::Sum || type == Scan::Prod) {
    dt = sum_dtype(dt);
  } else if (type == Scan::LogAddExp) {
    dt = detail::at_least_float(dt);
    return array(
        a.shape(), dt,
        std::make_shared<Scan>(to_stream(s), type, axis, reverse, inclusive),
        {astype(a, dt, s)});
  }
  auto p = std::make_shared<Scan>(to_stream(s), type, axis, reverse, inclusive);
  return array(a.shape(), dt, std::move(p), {a});
}
} // namespace

#define KILN_SCAN_OP(name, type)                                              \
  array name(const array& a, int axis, bool reverse, bool inclusive,          \
             StreamOrDevice s) {                                              \
    return scan(#name, a, axis, reverse, inclusive, Scan::type, s);           \
  }                                                                           \
  array name(const array& a, bool reverse, bool inclusive, StreamOrDevice s) { \
    return name(reshape(a, {-1}, s), 0, reverse, inclusive, s);               \
  }
KILN_SCAN_OP(cumsum, Sum)
KILN_SCAN_OP(cumprod, Prod)
KILN_SCAN_OP(cummax, Max)
KILN_SCAN_OP(cummin, Min)
KILN_SCAN_OP(logcumsumexp, LogAddExp)
#undef KILN_SCAN_OP

} // namespace kiln
