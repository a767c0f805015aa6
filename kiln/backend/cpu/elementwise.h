// Drivers for elementwise kernels on the CPU. They choose the output layout
// (inherit the inputs' common contiguous layout, else row-major), donate an
// input buffer when allowed, and run a flat loop over data_size or a strided
// loop over collapsed dimensions, split across cores.
#pragma once

#include <functional>
#include <string>

#include "kiln/backend/common/elementwise_layout.h"
#include "kiln/backend/common/strided.h"
#include "kiln/primitives/binary_table.h"
#include "kiln/backend/cpu/tiles.h"
#include "kiln/backend/cpu/vector_math.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"

namespace kiln::detail {

/** Elements per chunk below which a loop runs on one thread. */
inline constexpr size_t elementwise_grain = 1 << 15;

/** Allocates out for an elementwise op over same-shape inputs. Returns true
 *  when the flat path applies: every input either holds one element
 *  (data_size 1) or shares one contiguous layout, which out then inherits. */
bool set_elementwise_output(ArrayRefs inputs, array& out);

/** Throws invalid_argument naming the op and dtype. */
[[noreturn]] void unsupported_dtype(const char* op, Dtype dt);

template <typename T>
using ct = compute_t<T>;

/** Runs a contiguous unary op through its libmvec form when it has one;
 *  16-bit floats go through float in cache-sized blocks. */
template <typename In, typename Out, typename Op>
bool vector_unary(const In* src, Out* dst, size_t n) {
  constexpr VectorFn fn = vector_fn<Op>;
  if constexpr (!std::is_same_v<In, Out> || !fn.present) {
    return false;
  } else if constexpr (std::is_same_v<In, float>) {
    parallel_for(n, elementwise_grain, [&](size_t b, size_t e) {
      fn.f32(src + b, dst + b, e - b);
    });
    return true;
  } else if constexpr (std::is_same_v<In, double>) {
    parallel_for(n, elementwise_grain, [&](size_t b, size_t e) {
      fn.f64(src + b, dst + b, e - b);
    });
    return true;
  } else if constexpr (is_half_v<In>) {
    parallel_for(n, elementwise_grain, [&](size_t b, size_t e) {
      float buf[1024];
      for (size_t i = b; i < e; i += 1024) {
        size_t m = std::min<size_t>(1024, e - i);
        for (size_t j = 0; j < m; ++j) buf[j] = static_cast<float>(src[i + j]);
        fn.f32(buf, buf, m);
        for (size_t j = 0; j < m; ++j) dst[i + j] = In(buf[j]);
      }
    });
    return true;
  } else {
    return false;
  }
}

/** logaddexp over n elements in blocks: log1p(exp(-|a - b|)) through
 *  libmvec, then the functor's NaN and infinity cases and the max. */
template <typename T>
void vector_logaddexp(const T* a, const T* b, T* dst, size_t n, bool a_one,
                      bool b_one) {
  using C = compute_t<T>;
  constexpr VectorFn exp = vector_fn<Exp>, log1p = vector_fn<Log1p>;
  parallel_for(n, elementwise_grain, [&](size_t lo, size_t hi) {
    C t[1024];
    for (size_t i = lo; i < hi; i += 1024) {
      size_t m = std::min<size_t>(1024, hi - i);
      auto x = [&](size_t j) { return static_cast<C>(a[a_one ? 0 : i + j]); };
      auto y = [&](size_t j) { return static_cast<C>(b[b_one ? 0 : i + j]); };
      for (size_t j = 0; j < m; ++j) t[j] = -std::abs(x(j) - y(j));
      if constexpr (std::is_same_v<C, float>) {
        exp.f32(t, t, m);
        log1p.f32(t, t, m);
      } else {
        exp.f64(t, t, m);
        log1p.f64(t, t, m);
      }
      for (size_t j = 0; j < m; ++j) {
        C p = x(j), q = y(j), mx = p > q ? p : q;
        C r = std::isnan(p) || std::isnan(q) ? p + q
              : std::isinf(mx)               ? mx
                                             : mx + t[j];
        dst[i + j] = static_cast<T>(r);
      }
    }
  });
}

/** vector_unary for binary ops (a_one, b_one: that operand is one element
 *  used throughout). */
template <typename In, typename Out, typename Op>
bool vector_binary(const In* a, const In* b, Out* dst, size_t n, bool a_one,
                   bool b_one) {
  if constexpr (std::is_same_v<Op, LogAddExp> && std::is_same_v<In, Out> &&
                !is_complex_v<In> &&
                std::is_floating_point_v<compute_t<In>>) {
    vector_logaddexp(a, b, dst, n, a_one, b_one);
    return true;
  }
  constexpr VectorFn2 fn = vector_fn2<Op>;
  // Where elements [lo, ...) of an operand start.
  auto from = [](const In* p, bool one, size_t lo) { return one ? p : p + lo; };
  if constexpr (!std::is_same_v<In, Out> || !fn.present) {
    return false;
  } else if constexpr (std::is_same_v<In, float> ||
                       std::is_same_v<In, double>) {
    if constexpr (std::is_same_v<Op, Power>) {
      // x ** 2 (a squared error, a variance) is x * x: the correctly
      // rounded square, with pow's results for NaN, inf and -0, for a
      // multiply instead of a pow call (NumPy takes the same shortcut).
      if (b_one && b[0] == In(2)) {
        parallel_for(n, elementwise_grain, [&](size_t lo, size_t hi) {
          for (size_t i = lo; i < hi; ++i) dst[i] = a[i] * a[i];
        });
        return true;
      }
      if (bool odd; b_one && integer_exponent(b[0], odd)) {
        parallel_for(n, elementwise_grain, [&](size_t lo, size_t hi) {
          if constexpr (std::is_same_v<In, float>) {
            vpow_integer_f32(a + lo, b[0], odd, dst + lo, hi - lo);
          } else {
            vpow_integer_f64(a + lo, b[0], odd, dst + lo, hi - lo);
          }
        });
        return true;
      }
    }
    parallel_for(n, elementwise_grain, [&](size_t lo, size_t hi) {
      if constexpr (std::is_same_v<In, float>) {
        fn.f32(from(a, a_one, lo), from(b, b_one, lo), dst + lo, hi - lo,
               a_one, b_one);
      } else {
        fn.f64(from(a, a_one, lo), from(b, b_one, lo), dst + lo, hi - lo,
               a_one, b_one);
      }
    });
    return true;
  } else if constexpr (is_half_v<In>) {
    parallel_for(n, elementwise_grain, [&](size_t lo, size_t hi) {
      float x[1024], y[1024], r[1024];
      if (a_one) x[0] = static_cast<float>(a[0]);
      if (b_one) y[0] = static_cast<float>(b[0]);
      for (size_t i = lo; i < hi; i += 1024) {
        size_t m = std::min<size_t>(1024, hi - i);
        if (!a_one) {
          for (size_t j = 0; j < m; ++j) x[j] = static_cast<float>(a[i + j]);
        }
        if (!b_one) {
          for (size_t j = 0; j < m; ++j) y[j] = static_cast<float>(b[i + j]);
        }
        bool odd = false;
        if (std::is_same_v<Op, Power> && b_one && integer_exponent(y[0], odd)) {
          vpow_integer_f32(x, y[0], odd, r, m);
        } else {
          fn.f32(x, y, r, m, a_one, b_one);
        }
        for (size_t j = 0; j < m; ++j) dst[i + j] = In(r[j]);
      }
    });
    return true;
  } else {
    return false;
  }
}

template <typename In, typename Out, typename Op>
void unary_loop(const array& in, array& out, Op op) {
  bool flat = set_elementwise_output({in}, out);
  const In* src = in.data<In>();
  Out* dst = out.data<Out>();
  auto f = [&](In x) { return cast_to<Out>(op(static_cast<ct<In>>(x))); };
  if (flat) {
    // One element too takes the vector form where there is one: its
    // result must not depend on the array's length.
    if (vector_unary<In, Out, Op>(src, dst, out.data_size())) return;
    if (in.data_size() == 1 && out.data_size() == 1) {
      dst[0] = f(src[0]);
      return;
    }
    parallel_for(out.data_size(), elementwise_grain, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) dst[i] = f(src[i]);
    });
    return;
  }
  std::array<Strides, 2> st{in.strides(), out.strides()};
  Shape shape = collapse_dims(in.shape(), st);
  size_t rows = num_rows(shape);
  size_t grain = std::max<size_t>(1, elementwise_grain / shape.back());
  parallel_for(rows, grain, [&](size_t b, size_t e) {
    for_each_row(shape, st, b, e, [&](const auto& off, int64_t n) {
      const In* s = src + off[0];
      Out* d = dst + off[1];
      int64_t is = st[0].back();
      for (int64_t j = 0; j < n; ++j) d[j] = f(s[j * is]);
    });
  });
}

/** Rows [r0, r1) and columns [c0, c1) of the 2-d operand p (strides st)
 *  into buf, row-major with rows of tile_side: a transposed operand (unit
 *  stride down its columns) is read column by column. */
template <typename T>
void stage_tile(const T* p, const Strides& st, int64_t r0, int64_t r1,
                int64_t c0, int64_t c1, T* buf) {
  if (st[0] == 1 && st[1] != 1) {
    for (int64_t c = c0; c < c1; ++c) {
      const T* col = p + c * st[1];
      for (int64_t r = r0; r < r1; ++r)
        buf[(r - r0) * tile_side + c - c0] = col[r];
    }
    return;
  }
  for (int64_t r = r0; r < r1; ++r) {
    const T* row = p + r * st[0];
    T* b = buf + (r - r0) * tile_side - c0;
    for (int64_t c = c0; c < c1; ++c) b[c] = row[c * st[1]];
  }
}

template <typename In, typename Out, typename Op>
void binary_loop(const array& a, const array& b, array& out, Op op) {
  bool flat = set_elementwise_output({a, b}, out);
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* dst = out.data<Out>();
  auto f = [&](In x, In y) {
    return cast_to<Out>(op(static_cast<ct<In>>(x), static_cast<ct<In>>(y)));
  };
  if (flat) {
    bool sa = a.data_size() == 1, sb = b.data_size() == 1;
    size_t n = out.data_size();
    // A one-element result takes the vector form too (see unary_loop).
    if (n == 1) sa = sb = false;
    if (!(sa && sb) && vector_binary<In, Out, Op>(pa, pb, dst, n, sa, sb)) {
      return;
    }
    // Separate loops per scalar/vector combination let the compiler
    // vectorize each one.
    parallel_for(n, elementwise_grain, [&](size_t lo, size_t hi) {
      if (sa && sb) {
        for (size_t i = lo; i < hi; ++i) dst[i] = f(pa[0], pb[0]);
      } else if (sa) {
        In x = pa[0];
        for (size_t i = lo; i < hi; ++i) dst[i] = f(x, pb[i]);
      } else if (sb) {
        In y = pb[0];
        for (size_t i = lo; i < hi; ++i) dst[i] = f(pa[i], y);
      } else {
        for (size_t i = lo; i < hi; ++i) dst[i] = f(pa[i], pb[i]);
      }
    });
    return;
  }
  std::array<Strides, 3> st{a.strides(), b.strides(), out.strides()};
  Shape shape = collapse_dims(a.shape(), st);
  // A matrix and a transposed one (a weight and its gradient, say): the
  // row-major output is written tile by tile.
  bool transposed = shape.size() == 2 && shape[0] >= tile_side &&
                    shape[1] >= tile_side &&
                    ((st[0][0] == 1 && st[0][1] != 1) ||
                     (st[1][0] == 1 && st[1][1] != 1));
  if (transposed) {
    for_each_tile(shape[0], shape[1], [&](int64_t r0, int64_t r1, int64_t c0,
                                          int64_t c1) {
      // Each operand's tile is staged row-major, read in the order its
      // strides favour; the op then runs over contiguous rows.
      In ta[tile_side * tile_side], tb[tile_side * tile_side];
      stage_tile(pa, st[0], r0, r1, c0, c1, ta);
      stage_tile(pb, st[1], r0, r1, c0, c1, tb);
      // Mixed layouts give a row-major output (unit column stride).
      int64_t w = c1 - c0;
      for (int64_t r = r0; r < r1; ++r) {
        const In* x = ta + (r - r0) * tile_side;
        const In* y = tb + (r - r0) * tile_side;
        Out* d = dst + r * st[2][0] + c0;
        for (int64_t c = 0; c < w; ++c) d[c] = f(x[c], y[c]);
      }
    });
    return;
  }
  size_t grain = std::max<size_t>(1, elementwise_grain / shape.back());
  parallel_for(num_rows(shape), grain, [&](size_t lo, size_t hi) {
    for_each_row(shape, st, lo, hi, [&](const auto& off, int64_t n) {
      const In* x = pa + off[0];
      const In* y = pb + off[1];
      Out* d = dst + off[2];
      int64_t sx = st[0].back(), sy = st[1].back();
      for (int64_t j = 0; j < n; ++j) d[j] = f(x[j * sx], y[j * sy]);
    });
  });
}

/** out = op(c, a, b) with a bool condition c; a, b and out share a dtype. */
template <typename T, typename Op>
void ternary_loop(const array& c, const array& a, const array& b, array& out,
                  Op op) {
  bool flat = set_elementwise_output({c, a, b}, out);
  const bool* pc = c.data<bool>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* dst = out.data<T>();
  if (flat) {
    // A scalar operand is read with step 0.
    size_t sc = c.data_size() != 1, sa = a.data_size() != 1,
           sb = b.data_size() != 1;
    parallel_for(out.data_size(), elementwise_grain, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        dst[i] = op(pc[i * sc], pa[i * sa], pb[i * sb]);
      }
    });
    return;
  }
  std::array<Strides, 4> st{c.strides(), a.strides(), b.strides(),
                            out.strides()};
  Shape shape = collapse_dims(a.shape(), st);
  size_t grain = std::max<size_t>(1, elementwise_grain / shape.back());
  parallel_for(num_rows(shape), grain, [&](size_t lo, size_t hi) {
    for_each_row(shape, st, lo, hi, [&](const auto& off, int64_t n) {
      int64_t s0 = st[0].back(), s1 = st[1].back(), s2 = st[2].back();
      for (int64_t j = 0; j < n; ++j) {
        dst[off[3] + j] = op(pc[off[0] + j * s0], pa[off[1] + j * s1],
                             pb[off[2] + j * s2]);
      }
    });
  });
}

/** Unary op whose output dtype equals its input dtype. */
template <typename Op>
void unary_same_type(const char* name, const array& in, array& out, Op op) {
  dispatch_type(in.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (is_complex_v<T> && !Op::complex) {
      unsupported_dtype(name, in.dtype());
    } else {
      unary_loop<T, T>(in, out, op);
    }
  });
}

/** Unary op on floating types only (ops have promoted integers already). */
template <typename Op>
void unary_inexact(const char* name, const array& in, array& out, Op op) {
  dispatch_type(in.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (is_complex_v<T>) {
      if constexpr (Op::complex) {
        unary_loop<T, T>(in, out, op);
      } else {
        unsupported_dtype(name, in.dtype());
      }
    } else if constexpr (std::is_floating_point_v<ct<T>>) {
      unary_loop<T, T>(in, out, op);
    } else {
      unsupported_dtype(name, in.dtype());
    }
  });
}

enum class Types { all, numeric, integral, inexact };

template <typename T>
constexpr bool type_allowed(Types allowed) {
  switch (allowed) {
    case Types::numeric:
      return !std::is_same_v<T, bool>;
    case Types::integral:
      return std::is_integral_v<T>; // bool included
    case Types::inexact:
      return !std::is_integral_v<T>;
    default:
      return true;
  }
}

/** Binary op with out dtype = input dtype, over the allowed types. */
template <Types allowed = Types::all, typename Op>
void binary_same_type(const char* name, const array& a, const array& b,
                      array& out, Op op) {
  dispatch_type(a.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (!type_allowed<T>(allowed) ||
                  (is_complex_v<T> && !Op::complex)) {
      unsupported_dtype(name, a.dtype());
    } else {
      binary_loop<T, T>(a, b, out, op);
    }
  });
}

/** Binary op with a bool output (comparisons, logical ops). */
template <typename Op>
void binary_to_bool(const char* name, const array& a, const array& b,
                    array& out, Op op) {
  dispatch_type(a.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (is_complex_v<T> && !Op::complex) {
      unsupported_dtype(name, a.dtype());
    } else {
      binary_loop<T, bool>(a, b, out, op);
    }
  });
}

} // namespace kiln::detail
