// Softmax over the last axis, one row at a time: max, exp and sum, scale;
// logsumexp the same way: max, then the sum of exp(x - shift), its log.
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/backend/cpu/copy.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/softmax.h"

namespace kiln {

namespace {

// T is the element type, Acc the type sums accumulate in (T itself for
// imprecise 16-bit softmax, as MLX), C the type each exp is computed in.
template <typename T, typename Acc>
void softmax_rows(const T* x, T* out, size_t rows, int64_t n) {
  using C = compute_t<T>;
  size_t grain = std::max<size_t>(1, (1 << 14) / std::max<int64_t>(n, 1));
  detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
    std::vector<C> ex(n);
    for (size_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      T* orow = out + r * n;
      C m = -std::numeric_limits<C>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        C v = static_cast<C>(xr[j]);
        m = v > m || std::isnan(v) ? v : m;
      }
      Acc sum = Acc(0);
      for (int64_t j = 0; j < n; ++j) {
        // Rounded to Acc when Acc is 16-bit, so the sum sees what MLX's does.
        ex[j] = static_cast<C>(Acc(std::exp(static_cast<C>(xr[j]) - m)));
        sum = Acc(static_cast<C>(sum) + ex[j]);
      }
      C inv = C(1) / static_cast<C>(sum);
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
    for (size_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      C m = -std::numeric_limits<C>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        C v = static_cast<C>(xr[j]);
        m = v > m || std::isnan(v) ? v : m;
      }
      C shift = std::isinf(m) ? C(0) : m;
      C sum = C(0);
      for (int64_t j = 0; j < n; ++j) {
        sum += std::exp(static_cast<C>(xr[j]) - shift);
      }
      out[r] = T(std::log(sum) + shift);
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
      throw std::invalid_argument(std::string("[LogSumExp] unsupported dtype ") +
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
