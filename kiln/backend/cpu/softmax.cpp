// Softmax over the last axis, one row at a time: max, exp and sum, scale;
// logsumexp the same way: max, then the sum of exp(x - shift), its log.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/copy.h"
#include "kiln/backend/cpu/extremes.h"
#include "kiln/backend/cpu/vector_math.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/softmax.h"

namespace kiln {

namespace {

// The row's maximum, NaN if it holds one (float32 through the 16-lane
// loops of extremes.h).
template <typename C>
C row_max(const C* x, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    return detail::max_run_f32(x, static_cast<size_t>(n));
  } else {
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t j = 0; j < n; ++j) m = x[j] > m || std::isnan(x[j]) ? x[j] : m;
    return m;
  }
}

// ex[j] = exp(x[j] - shift) through libmvec's SIMD exp, and their sum, kept
// in four running sums so the additions overlap. A scalar exp per element
// made a 2048x2048 float32 softmax take 14-17 ms.
template <typename C>
C exp_shifted(const C* x, C shift, C* ex, int64_t n) {
  for (int64_t j = 0; j < n; ++j) ex[j] = x[j] - shift;
  constexpr detail::VectorFn exp = detail::vector_fn<detail::Exp>;
  if constexpr (std::is_same_v<C, float>) {
    exp.f32(ex, ex, static_cast<size_t>(n));
  } else {
    exp.f64(ex, ex, static_cast<size_t>(n));
  }
  C s[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int k = 0; k < 4; ++k) s[k] += ex[j + k];
  }
  for (; j < n; ++j) s[0] += ex[j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// Row r of x in the compute type C: x itself when T is C, else converted
// into buf.
template <typename T, typename C>
const C* compute_row(const T* x, int64_t n, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return x;
  } else {
    for (int64_t j = 0; j < n; ++j) buf[j] = static_cast<C>(x[j]);
    return buf.data();
  }
}

// T is the element type, Acc the type sums accumulate in (T itself for
// imprecise 16-bit softmax, as MLX), C the type each exp is computed in.
template <typename T, typename Acc>
void softmax_rows(const T* x, T* out, size_t rows, int64_t n) {
  using C = compute_t<T>;
  size_t grain = std::max<size_t>(1, (1 << 14) / std::max<int64_t>(n, 1));
  detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
    std::vector<C> ex(n), xs(std::is_same_v<T, C> ? 0 : n);
    for (size_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      T* orow = out + r * n;
      const C* xc = compute_row(xr, n, xs);
      C sum = exp_shifted(xc, row_max(xc, n), ex.data(), n);
      if constexpr (!std::is_same_v<Acc, C>) {
        // Each exp and each partial sum rounded to the 16-bit Acc, so the
        // sum sees what MLX's does.
        Acc acc = Acc(0);
        for (int64_t j = 0; j < n; ++j) {
          ex[j] = static_cast<C>(Acc(ex[j]));
          acc = Acc(static_cast<C>(acc) + ex[j]);
        }
        sum = static_cast<C>(acc);
      }
      C inv = C(1) / sum;
      for (int64_t j = 0; j < n; ++j) orow[j] = T(ex[j] * inv);
    }
  });
}

// C is the compute type (float32 for 16-bit T); the shift is the row max, or
// 0 when that is infinite (inf - inf would be NaN).
template <typename T>
void logsumexp_rows(const T* x, T* out, size_t rows, int64_t n) {
  using C = compute_t<T>;
  size_t grain = std::max<size_t>(1, (1 << 14) / std::max<int64_t>(n, 1));
  detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
    std::vector<C> ex(n), xs(std::is_same_v<T, C> ? 0 : n);
    for (size_t r = b; r < e; ++r) {
      const C* xc = compute_row(x + r * n, n, xs);
      C m = row_max(xc, n);
      C shift = std::isinf(m) ? C(0) : m;
      out[r] = T(std::log(exp_shifted(xc, shift, ex.data(), n)) + shift);
    }
  });
}

// A row-major copy of x unless it is one already.
array row_major(const array& x) {
  if (x.flags().row_contiguous) return x;
  auto tmp = array::uninitialized(x.shape(), x.dtype());
  detail::copy_row_major(x, tmp);
  return tmp;
}

} // namespace

void LogSumExp::eval_cpu(const std::vector<array>& inputs, array& out) {
  array x = row_major(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int64_t n = x.shape(-1);
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      logsumexp_rows<T>(x.data<T>(), out.data<T>(), out.size(), n);
    } else {
      throw std::invalid_argument(
          std::string("[LogSumExp] unsupported dtype ") +
          dtype_name(x.dtype()) + ".");
    }
  });
}

void Softmax::eval_cpu(const std::vector<array>& inputs, array& out) {
  array x = row_major(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int64_t n = out.ndim() == 0 ? 1 : out.shape(-1);
  size_t rows = out.size() / n;
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      if (precise_) {
        softmax_rows<T, compute_t<T>>(x.data<T>(), out.data<T>(), rows, n);
      } else {
        softmax_rows<T, T>(x.data<T>(), out.data<T>(), rows, n);
      }
    } else {
      throw std::invalid_argument(std::string("[Softmax] unsupported dtype ") +
                                  dtype_name(x.dtype()) + ".");
    }
  });
}

} // namespace kiln
