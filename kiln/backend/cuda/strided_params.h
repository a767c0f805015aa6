// Host twin of device/utils.cuh's Strided<K> (same members, same order): a
// collapsed shape and K operands' strides, passed by value to the general
// kernels of every family.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kiln/backend/common/strided.h"

namespace kiln::cuda {

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
  out.ndim = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    out.shape[d] = shape[d];
    for (size_t k = 0; k < K; ++k) out.strides[k][d] = strides[k][d];
  }
  return true;
}

/** Collapses shape and strides (detail::collapse_dims) into out. */
template <size_t K>
bool collapsed(const Shape& shape, std::array<Strides, K> strides,
               Strided<K>& out) {
  Shape s = detail::collapse_dims(shape, strides);
  return to_strided(s, strides, out);
}

} // namespace kiln::cuda
