#include "kiln/core/layout.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace kiln {

Layout layout_of(const Shape& shape, const Strides& strides) {
  size_t size = 1;
  for (auto d : shape) size *= static_cast<size_t>(d);
  if (size == 0) return {0, {true, true, true}};

  // Dimensions that address distinct buffer slots: size > 1, stride != 0.
  // On the stack for the usual ranks: every view's eval computes this, and
  // a heap vector per call was a visible share of a graph's host time.
  using Dim = std::pair<int64_t, int32_t>;
  constexpr size_t inline_dims = 16;
  Dim inline_buf[inline_dims];
  std::vector<Dim> heap_buf;
  Dim* dims = inline_buf;
  if (shape.size() > inline_dims) {
    heap_buf.resize(shape.size());
    dims = heap_buf.data();
  }
  size_t n_dims = 0;
  bool negative = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1 && strides[i] != 0) {
      dims[n_dims++] = {strides[i], shape[i]};
      negative |= strides[i] < 0;
    }
  }
  size_t data_size = 1;
  for (size_t k = 0; k < n_dims; ++k) {
    data_size *= static_cast<size_t>(dims[k].second);
  }

  bool row = true;
  int64_t expect = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    row &= strides[i] == expect;
    expect *= shape[i];
  }
  bool col = true;
  expect = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    col &= strides[i] == expect;
    expect *= shape[i];
  }

  bool contiguous = !negative;
  if (contiguous) {
    std::sort(dims, dims + n_dims);
    expect = 1;
    for (size_t k = 0; k < n_dims; ++k) {
      contiguous &= dims[k].first == expect;
      expect *= dims[k].second;
    }
  }
  if (!contiguous) data_size = size;
  // Row/col layouts address every element, so they are dense by definition.
  return {row || col ? size : data_size, {contiguous || row || col, row, col}};
}

array::Flags row_major_flags(const Shape& shape) {
  int long_axes = 0;
  bool empty = false;
  for (auto d : shape) {
    long_axes += d > 1;
    empty = empty || d == 0;
  }
  return {true, true, empty || long_axes <= 1};
}

Strides broadcast_strides(const array& in, const Shape& shape) {
  Strides strides(shape.size(), 0);
  size_t diff = shape.size() - in.ndim();
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (in.shape()[i] == shape[i + diff]) strides[i + diff] = in.strides()[i];
  }
  return strides;
}

} // namespace kiln
