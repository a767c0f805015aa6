// Stride collapsing and n-d iteration shared by the backends.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kiln/core/array.h"

namespace kiln::detail {

/** Merge adjacent dimensions that every operand walks contiguously while the
 *  merged extent fits in int32, and drop size-1 dimensions. Returns the new
 * shape; strides (a std::array or a std::vector of Strides, one per operand)
 * are rewritten in place. A 0-d or all-ones shape becomes {1} with strides {0}.
 */
template <typename StridesList>
Shape collapse_dims(const Shape& shape, StridesList& strides) {
  const size_t K = strides.size();
  Shape out_shape;
  StridesList out_strides = strides;
  for (auto& s : out_strides) s.clear();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    // A merged extent must still fit a dimension (int32): kernels index
    // within a dimension in 32 bits and across dimensions in 64.
    bool merge = !out_shape.empty() &&
                 int64_t{out_shape.back()} * shape[i] <= INT32_MAX;
    for (size_t k = 0; k < K && merge; ++k) {
      merge = out_strides[k].back() == strides[k][i] * shape[i];
    }
    if (merge) {
      out_shape.back() *= shape[i];
      for (size_t k = 0; k < K; ++k) out_strides[k].back() = strides[k][i];
    } else {
      out_shape.push_back(shape[i]);
      for (size_t k = 0; k < K; ++k) out_strides[k].push_back(strides[k][i]);
    }
  }
  if (out_shape.empty()) {
    out_shape.push_back(1);
    for (size_t k = 0; k < K; ++k) out_strides[k].push_back(0);
  }
  strides = std::move(out_strides);
  return out_shape;
}

/** Walk rows of the last dimension: for rows [row_begin, row_end) of the
 *  collapsed shape, call fn(offsets, n) where offsets[k] is the element
 *  offset of operand k at the row's start and n the row length. */
template <size_t K, typename Fn>
void for_each_row(const Shape& shape, const std::array<Strides, K>& strides,
                  size_t row_begin, size_t row_end, Fn&& fn) {
  int nd = static_cast<int>(shape.size());
  int64_t inner = shape[nd - 1];
  std::vector<int64_t> idx(nd > 1 ? nd - 1 : 1, 0);
  std::array<int64_t, K> off{};
  // Unravel row_begin into the outer index.
  size_t r = row_begin;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = static_cast<int64_t>(r % shape[d]);
    r /= shape[d];
    for (size_t k = 0; k < K; ++k) off[k] += idx[d] * strides[k][d];
  }
  for (size_t row = row_begin; row < row_end; ++row) {
    fn(off, inner);
    for (int d = nd - 2; d >= 0; --d) {
      for (size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (++idx[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
  }
}

inline size_t num_rows(const Shape& collapsed) {
  size_t rows = 1;
  for (size_t d = 0; d + 1 < collapsed.size(); ++d) rows *= collapsed[d];
  return rows;
}

} // namespace kiln::detail
