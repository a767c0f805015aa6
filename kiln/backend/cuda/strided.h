// Host side of the kernels' layout parameters: the twin of device/utils.cuh's
// Strided<K> (same members, same order, passed by value to the kernels), and
// the lines along one axis that the scan and sort kernels walk.
#pragma once

#include <array>
#include <cstdint>

#include "kiln/backend/common/strided.h"
#include "kiln/core/array.h"

namespace kiln::cuda {

/** Dimensions a general kernel handles after collapsing (device/utils.cuh). */
constexpr int max_ndim = 10;

template <size_t K>
struct Strided {
  int ndim;
  int32_t shape[max_ndim];
  int64_t strides[K][max_ndim];
};

/** Fills out from an already collapsed shape; false when it has more
 *  dimensions than the kernels take. */
template <size_t K>
bool to_strided(const Shape& shape, const std::array<Strides, K>& strides,
                Strided<K>& out) {
  if (shape.size() > static_cast<size_t>(max_ndim)) return false;
  out = {};
  out.ndim = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    out.shape[d] = shape[d];
    for (size_t k = 0; k < K; ++k) out.strides[k][d] = strides[k][d];
  }
  return true;
}

/** Collapses shape and the K operands' strides into out; false when more
 *  than max_ndim dimensions remain. */
template <size_t K>
bool collapsed(const Shape& shape, std::array<Strides, K> strides,
               Strided<K>& out) {
  Shape s = detail::collapse_dims(shape, strides);
  return to_strided(s, strides, out);
}

/** The lines of a non-empty array along one axis, numbered row-major over
 *  the other axes. Line l starts at input offset `starts`(l) and at output
 *  offset (l / inner) * n * inner + l % inner of a row-major output, where
 *  its elements are inner apart. */
struct AxisLines {
  int64_t n;         // elements per line
  int64_t inner;     // product of the output's dims after the axis
  int64_t lines;     // number of lines
  int64_t in_stride; // input stride along the axis
  Strided<1> starts;
};

/** False when the other axes do not collapse to max_ndim dimensions. */
inline bool axis_lines(const array& in, int axis, AxisLines& out) {
  Shape others = in.shape();
  Strides strides = in.strides();
  others.erase(others.begin() + axis);
  strides.erase(strides.begin() + axis);
  if (!collapsed<1>(others, {strides}, out.starts)) return false;
  out.n = in.shape(axis);
  out.inner = 1;
  for (size_t d = axis + 1; d < in.ndim(); ++d) out.inner *= in.shape(d);
  out.lines = static_cast<int64_t>(in.size()) / out.n;
  out.in_stride = in.strides()[axis];
  return true;
}

} // namespace kiln::cuda
