// Host twin of device/utils.cuh's Strided<K>, the shape and strides a
// general kernel takes by value: same members, same order. A kernel declared
// with fewer operands reads a prefix of it (its parameter's size).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

/** Dimensions a general kernel handles after collapsing. */
constexpr int max_ndim = 10;

template <size_t K>
struct Strided {
  int ndim;
  int32_t shape[max_ndim];
  int64_t strides[K][max_ndim];
};

} // namespace kiln::cuda
