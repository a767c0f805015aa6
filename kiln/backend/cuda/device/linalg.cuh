// The small kernels around cuSOLVER's factorizations (linalg.cpp): over
// `total` elements of row-major n x n matrices stored one after another,
// zero the entries outside the triangle a routine wrote (its other
// triangle still holds the input), or write identity matrices (the right
// sides whose solution is an inverse).
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

template <typename T>
__global__ void keep_triangle(T* __restrict__ a, int64_t n, int64_t total,
                              bool upper) {
  for (int64_t i = first_index<1>(); i < total; i += grid_step<1>()) {
    int64_t r = (i / n) % n, c = i % n;
    if (upper ? c < r : c > r) a[i] = T(0);
  }
}

template <typename T>
__global__ void identity(T* __restrict__ a, int64_t n, int64_t total) {
  for (int64_t i = first_index<1>(); i < total; i += grid_step<1>()) {
    a[i] = (i / n) % n == i % n ? T(1) : T(0);
  }
}

} // namespace kiln::cuda
