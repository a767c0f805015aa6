// Host side of the general kernels' layout parameter: the twin of
// device/utils.cuh's Strided<K> (same members, same order), filled from a
// shape and K operands' strides collapsed together.
#pragma once

#include <array>

#include "kiln/backend/common/strided.h"

namespace kiln::cuda {

/** Dimensions a general kernel handles after collapsing (device/utils.cuh). */
constexpr int max_ndim = 10;

template <size_t K>
struct Strided {
  int ndim;
  int32_t shape[max_ndim];
  int64_t strides[K][max_ndim];
};

/** Collapses shape under the K strides into out; false when more than
 *  max_ndim dimensions remain (the caller falls back to the CPU). */
template <size_t K>
bool collapsed(const Shape& shape, std::array<Strides, K> strides,
               Strided<K>& out) {
  Shape s = detail::collapse_dims(shape, strides);
  if (s.size() > static_cast<size_t>(max_ndim)) return false;
  out = {};
  out.ndim = static_cast<int>(s.size());
  for (size_t d = 0; d < s.size(); ++d) {
    out.shape[d] = s[d];
    for (size_t k = 0; k < K; ++k) out.strides[k][d] = strides[k][d];
  }
  return true;
}

} // namespace kiln::cuda
