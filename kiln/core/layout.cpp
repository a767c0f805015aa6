#include "kiln/core/layout.h"

#include <algorithm>
#include <utility>

namespace kiln {

Layout layout_of(const Shape& shape, const Strides& strides) {
  size_t size = 1;
  for (auto d : shape) size *= static_cast<size_t>(d);
  if (size == 0) return {0, {true, true, true}};

  // Dimensions that address distinct buffer slots: size > 1, stride != 0.
  std::vector<std::pair<int64_t, int32_t>> dims;
  bool negative = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1 && strides[i] != 0) {
      dims.emplace_back(strides[i], shape[i]);
      negative |= strides[i] < 0;
    }
  }
  size_t data_size = 1;
  for (auto& [s, n] : dims) data_size *= static_cast<size_t>(n);

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
    std::sort(dims.begin(), dims.end());
    expect = 1;
    for (auto& [s, n] : dims) {
      contiguous &= s == expect;
      expect *= n;
    }
  }
  if (!contiguous) data_size = size;
  // Row/col layouts address every element, so they are dense by definition.
  return {row || col ? size : data_size, {contiguous || row || col, row, col}};
}

} // namespace kiln
