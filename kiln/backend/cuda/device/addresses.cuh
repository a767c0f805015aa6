// Device arrays of matrix addresses, what cuBLAS's and cuSOLVER's batched
// routines take: written by a kernel on the stream that uses them, so no
// upload from host memory (which waits for the stream) sits between a
// batch's producer and its routine; and GatherMM's picked matrices copied
// one after another for its grouped GEMM.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

/** out[i] = base + i * stride bytes, for i < count. */
template <typename T>
__global__ void strided_addresses(T* base, int64_t stride, int64_t count,
                                  T** __restrict__ out) {
  for (int64_t i = first_index<1>(); i < count; i += grid_step<1>()) {
    out[i] = base + i * stride;
  }
}

/** GatherMM's picked matrix within n matrices `stride` bytes apart: the
 *  index read as int32 (the op's uint32 cast keeps a negative index's
 *  bits), counted from the end when negative, then clamped into range, as
 *  the CPU reads it. */
template <typename I>
__device__ __forceinline__ int64_t picked_offset(I index, int64_t n,
                                                 int64_t stride) {
  int64_t i = static_cast<int32_t>(static_cast<uint32_t>(index));
  if (i < 0) i += n;
  i = i < 0 ? 0 : (i >= n ? n - 1 : i);
  return i * stride;
}

/** GatherMM's address lists, one entry per pick p < picks: a's matrix
 *  lhs[p] of na, b's matrix rhs[p] of nb, and output matrix p (row-major
 *  index arrays). */
template <typename I>
__global__ void gather_mm_addresses(const I* __restrict__ lhs,
                                    const I* __restrict__ rhs, const char* a,
                                    const char* b, char* c, int64_t na,
                                    int64_t nb, int64_t a_stride,
                                    int64_t b_stride, int64_t c_stride,
                                    int64_t picks, const char** a_out,
                                    const char** b_out, char** c_out) {
  for (int64_t p = first_index<1>(); p < picks; p += grid_step<1>()) {
    a_out[p] = a + picked_offset(lhs[p], na, a_stride);
    b_out[p] = b + picked_offset(rhs[p], nb, b_stride);
    c_out[p] = c + p * c_stride;
  }
}

/** The picked matrices of a row-major one after another, for a grouped
 *  GEMM: out element i is row r, column c of a's matrix lhs[i / (m * k)]
 *  (strides sr, sc in elements, matrices `stride` elements apart, read as
 *  picked_offset reads them), copied as W (a word of the element's size). */
template <typename W>
__global__ void picked_matrices(const W* __restrict__ a,
                                const uint32_t* __restrict__ lhs, int64_t na,
                                int64_t stride, int64_t sr, int64_t sc,
                                int64_t m, int64_t k, int64_t total,
                                W* __restrict__ out) {
  for (int64_t i = first_index<1>(); i < total; i += grid_step<1>()) {
    int64_t p = i / (m * k), r = (i / k) % m, c = i % k;
    out[i] = a[picked_offset(lhs[p], na, stride) + r * sr + c * sc];
  }
}

} // namespace kiln::cuda
