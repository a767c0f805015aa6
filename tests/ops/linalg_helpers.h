// Helpers for the matmul, einsum, linalg and conv tests: strided views made
// directly from buffers (the layouts a slice or flip produces) and float64
// reference products.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/layout.h"
#include "test_utils.h"

namespace kiln::test {

/** Elements start, start + step, ... (count of them) along axis, as a view
 *  sharing a's buffer; a negative step walks backwards. */
inline array strided_view(array a, int axis, int start, int step, int count) {
  a.eval();
  Shape shape = a.shape();
  Strides strides = a.strides();
  int64_t offset = start * strides[axis];
  shape[axis] = count;
  strides[axis] *= step;
  auto out = array::uninitialized(shape, a.dtype());
  auto l = layout_of(shape, strides);
  out.copy_shared_buffer(a, strides, l.flags, l.data_size, offset);
  out.set_status(array::Status::available);
  return out;
}

/** A view of a reversed along axis (negative stride). */
inline array reversed(const array& a, int axis) {
  int n = a.shape(axis);
  return strided_view(a, axis, n - 1, -1, n);
}

/** Every second element along the last two axes of a twice-as-large array,
 *  holding random values: a view with non-unit inner strides. */
inline array random_sliced(const Shape& shape, Dtype dt, double lo = -2,
                           double hi = 2) {
  Shape big = shape;
  int nd = static_cast<int>(shape.size());
  for (int d = std::max(0, nd - 2); d < nd; ++d) big[d] = 2 * shape[d] + 1;
  auto x = random_array(big, dt, lo, hi);
  for (int d = std::max(0, nd - 2); d < nd; ++d) {
    x = strided_view(x, d, 1, 2, shape[d]);
  }
  return x;
}

/** a's values in a view whose last axis has stride 2 (the slots between
 *  hold 999, so reading them shows). */
inline array sliced_copy(const array& a) {
  auto v = to_doubles(a);
  std::vector<double> big;
  for (double x : v) big.insert(big.end(), {x, 999.0});
  Shape shape = a.shape();
  if (shape.empty()) return a;
  shape.back() *= 2;
  array b(big.begin(), shape, a.dtype());
  return strided_view(b, static_cast<int>(shape.size()) - 1, 0, 2,
                      a.shape().back());
}

/** Row-major (m x k) @ (k x n) in float64. */
inline std::vector<double> ref_matmul(const std::vector<double>& a,
                                      const std::vector<double>& b, int m,
                                      int k, int n) {
  std::vector<double> c(static_cast<size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c[i * n + j] = acc;
    }
  }
  return c;
}

/** Batched reference: a (..., m, k) and b (..., k, n) given as row-major
 *  values of equal batch count. */
inline std::vector<double> ref_batched_matmul(const std::vector<double>& a,
                                              const std::vector<double>& b,
                                              int batch, int m, int k, int n) {
  std::vector<double> out;
  for (int i = 0; i < batch; ++i) {
    std::vector<double> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
    std::vector<double> bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
    auto ci = ref_matmul(ai, bi, m, k, n);
    out.insert(out.end(), ci.begin(), ci.end());
  }
  return out;
}

/** Row-major transpose of the last two axes of batch (r x c) matrices. */
inline std::vector<double> ref_transpose(const std::vector<double>& a,
                                         int batch, int r, int c) {
  std::vector<double> out(a.size());
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < r; ++i) {
      for (int j = 0; j < c; ++j) {
        out[b * r * c + j * r + i] = a[b * r * c + i * c + j];
      }
    }
  }
  return out;
}

/** Checks that fn throws std::invalid_argument whose message names op. */
template <typename F>
::testing::AssertionResult throws_naming(F&& fn, const std::string& op) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find("[" + op + "]") != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "message lacks [" << op << "]: " << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "wrong exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception";
}

} // namespace kiln::test
