// Scans (cumsum, cumprod, cummax, cummin, logcumsumexp) along one axis. Each
// line along the axis is scanned sequentially; lines run in parallel. Along
// an outer axis, blocks of lines step together, a row at a time.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/primitives/reduction.h"

namespace kiln {

namespace {

/** Columns of the running values a thread carries down an outer axis. */
constexpr int64_t column_block = 512;

// A scan along an outer axis (axis < ndim - 1): the output (row-major) is
// (outer, n, width), and each step along the axis updates a block of
// running values across the width at once, reading and writing whole rows
// (vectorized), where one line at a time would step through memory by
// `width`. The input's axes before and after the scanned one must each
// collapse to one stride. False when they do not.
template <typename In, typename Out, typename Op>
bool scan_columns(const array& in, Out* dst, int axis, bool reverse,
                  bool inclusive, typename detail::ct<Out> init, Op op) {
  using A = detail::ct<Out>;
  int nd = static_cast<int>(in.ndim());
  auto collapsed = [&](int lo, int hi, int64_t& len, int64_t& stride) {
    Shape sh(in.shape().begin() + lo, in.shape().begin() + hi);
    std::array<Strides, 1> st{
        Strides(in.strides().begin() + lo, in.strides().begin() + hi)};
    if (sh.empty()) {
      len = 1;
      stride = 0;
      return true;
    }
    Shape c = detail::collapse_dims(sh, st);
    if (c.size() != 1) return false;
    len = c[0];
    stride = st[0][0];
    return true;
  };
  int64_t outer, o_stride, width, w_stride;
  if (!collapsed(0, axis, outer, o_stride) ||
      !collapsed(axis + 1, nd, width, w_stride)) {
    return false;
  }
  int64_t n = in.shape(axis), a_stride = in.strides()[axis];
  const In* src = in.data<In>();
  int64_t blocks = (width + column_block - 1) / column_block;
  size_t grain = std::max<size_t>(
      1, detail::elementwise_grain / static_cast<size_t>(n * column_block));
  detail::parallel_for(
      static_cast<size_t>(outer * blocks), grain, [&](size_t b, size_t e) {
        A acc[column_block];
        for (size_t t = b; t < e; ++t) {
          int64_t o = static_cast<int64_t>(t) / blocks;
          int64_t w0 = (static_cast<int64_t>(t) % blocks) * column_block;
          int64_t w1 = std::min(width, w0 + column_block);
          std::fill(acc, acc + (w1 - w0), init);
          for (int64_t k = 0; k < n; ++k) {
            int64_t i = reverse ? n - 1 - k : k;
            const In* x = src + o * o_stride + i * a_stride + w0 * w_stride;
            Out* y = dst + (o * n + i) * width + w0;
            for (int64_t w = 0; w < w1 - w0; ++w) {
              A v = cast_to<A>(static_cast<detail::ct<In>>(x[w * w_stride]));
              if (inclusive) {
                acc[w] = op(acc[w], v);
                y[w] = cast_to<Out>(acc[w]);
              } else {
                y[w] = cast_to<Out>(acc[w]);
                acc[w] = op(acc[w], v);
              }
            }
          }
        }
      });
  return true;
}

template <typename In, typename Out, typename Op>
void scan(const array& in, array& out, int axis, bool reverse, bool inclusive,
          typename detail::ct<Out> init, Op op) {
  using A = detail::ct<Out>;
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const In* src = in.data<In>();
  Out* dst = out.data<Out>();
  if (axis < static_cast<int>(in.ndim()) - 1 &&
      scan_columns<In, Out>(in, dst, axis, reverse, inclusive, init, op)) {
    return;
  }
  int64_t n = in.shape(axis);
  int64_t is = in.strides()[axis], os = out.strides()[axis];
  Shape lines = in.shape();
  lines[axis] = 1;
  std::array<Strides, 2> st{in.strides(), out.strides()};
  st[0][axis] = st[1][axis] = 0;
  Shape shape = detail::collapse_dims(lines, st);
  size_t rows = detail::num_rows(shape);
  size_t grain =
      std::max<size_t>(1, detail::elementwise_grain / (n * shape.back() + 1));
  detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
    detail::for_each_row(shape, st, b, e, [&](const auto& off, int64_t m) {
      for (int64_t j = 0; j < m; ++j) {
        const In* x = src + off[0] + j * st[0].back();
        Out* y = dst + off[1] + j * st[1].back();
        A acc = init;
        for (int64_t k = 0; k < n; ++k) {
          int64_t i = reverse ? n - 1 - k : k;
          A v = cast_to<A>(static_cast<detail::ct<In>>(x[i * is]));
          if (inclusive) {
            acc = op(acc, v);
            y[i * os] = cast_to<Out>(acc);
          } else {
            y[i * os] = cast_to<Out>(acc);
            acc = op(acc, v);
          }
        }
      }
    });
  });
}

template <typename A>
A lowest() {
  if constexpr (std::numeric_limits<A>::has_infinity) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}

template <typename A>
A highest() {
  if constexpr (std::numeric_limits<A>::has_infinity) {
    return std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::max();
  }
}

template <typename A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// log(exp(a) + exp(b)) without overflow; -inf is the identity, NaN spreads.
template <typename A>
A log_add_exp(A a, A b) {
  if (std::isnan(a) || std::isnan(b)) return a + b;
  A m = std::max(a, b);
  if (std::isinf(m)) return m; // both -inf, or an inf that dominates
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

} // namespace

void Scan::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  dispatch_type(in.dtype(), [&](auto tag) {
    using In = KILN_TYPE(tag);
    if (type_ == LogAddExp) {
      if constexpr (is_complex_v<In>) {
        // As MLX's: the larger (real part, then imaginary part) plus
        // log1p(exp(smaller - larger)), from -inf + 0i.
        float inf = std::numeric_limits<float>::infinity();
        scan<In, In>(in, out, axis_, reverse_, inclusive_, In(-inf, 0.0f),
                     [inf](In a, In b) {
                       In hi = detail::Maximum{}(a, b);
                       In lo = detail::Minimum{}(a, b);
                       if (hi.real() == -inf) return hi;
                       return hi + std::log(In(1.0f) + std::exp(lo - hi));
                     });
      } else if constexpr (std::is_floating_point_v<detail::ct<In>>) {
        using A = detail::ct<In>;
        scan<In, In>(in, out, axis_, reverse_, inclusive_, lowest<A>(),
                     [](A a, A b) { return log_add_exp(a, b); });
      } else {
        detail::unsupported_dtype(name(), in.dtype());
      }
      return;
    }
    if (type_ == Max || type_ == Min) {
      if constexpr (is_complex_v<In>) {
        // Ordered by real part, then imaginary part, as MLX; NaN spreads.
        float inf = std::numeric_limits<float>::infinity();
        if (type_ == Max) {
          scan<In, In>(in, out, axis_, reverse_, inclusive_, In(-inf, -inf),
                       detail::Maximum{});
        } else {
          scan<In, In>(in, out, axis_, reverse_, inclusive_, In(inf, inf),
                       detail::Minimum{});
        }
      } else {
        using A = detail::ct<In>;
        if (type_ == Max) {
          scan<In, In>(in, out, axis_, reverse_, inclusive_, lowest<A>(),
                       [](A a, A b) { return is_nan(a) || a > b ? a : b; });
        } else {
          scan<In, In>(in, out, axis_, reverse_, inclusive_, highest<A>(),
                       [](A a, A b) { return is_nan(a) || a < b ? a : b; });
        }
      }
      return;
    }
    dispatch_type(out.dtype(), [&](auto out_tag) {
      using Out = KILN_TYPE(out_tag);
      if constexpr (std::is_same_v<In, Out> ||
                    (std::is_integral_v<In> && std::is_integral_v<Out> &&
                     sizeof(Out) >= 4)) {
        using A = detail::ct<Out>;
        if (type_ == Sum) {
          scan<In, Out>(in, out, axis_, reverse_, inclusive_, A(0),
                        [](A a, A b) { return static_cast<A>(a + b); });
        } else {
          scan<In, Out>(in, out, axis_, reverse_, inclusive_, A(1),
                        [](A a, A b) { return static_cast<A>(a * b); });
        }
      } else {
        detail::unsupported_dtype(name(), in.dtype());
      }
    });
  });
}

} // namespace kiln
