// Device arrays of matrix addresses for cuBLAS's and cuSOLVER's batched
// routines, written by kernels (device/addresses.cuh) on the routine's
// stream, compiled by NVRTC at first use in both builds. Each launch is
// sent to the GPU before these return (not left recorded for a graph):
// the routine that reads the list may hold a stream handle taken before.
#pragma once

#include <cstdint>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/array.h"

namespace kiln::cuda {

/** gStridedAddresses: base + i * stride. */
JitKernel strided_addresses_kernel();
/** gGatherMMAddresses: GatherMM's picked matrices. */
JitKernel gather_mm_addresses_kernel();
/** gPickedMatrices{2|4|8}: picked matrices copied, by element size. */
JitKernel picked_matrices_kernel(size_t itemsize);

/** Makes list (count pointers) the addresses of `count` blocks `stride`
 *  bytes apart from base, on stream s. */
void strided_addresses(Scratch& list, void* base, int64_t count,
                       size_t stride, const Stream& s);

/** GatherMM's address lists in list (3 * picks pointers: a's, then b's,
 *  then c's): for pick p, a's matrix lhs[p] of na (a_stride bytes apart),
 *  b's matrix rhs[p] of nb, and c + p * c_stride. lhs and rhs are row-major
 *  uint32 device arrays of `picks` elements. */
void gather_mm_addresses(Scratch& list, const void* lhs, const void* rhs,
                         const void* a, const void* b, void* c, int64_t na,
                         int64_t nb, int64_t a_stride, int64_t b_stride,
                         int64_t c_stride, int64_t picks, const Stream& s);

/** out = a's matrices lhs[p] for p < picks (row-major uint32 device
 *  indices, read as GatherMM reads them from na matrices `stride`
 *  elements apart), each m x k with strides sr, sc in elements, copied
 *  row-major one after another; elements of `itemsize` bytes. */
void picked_matrices(const void* a, const void* lhs, int64_t na,
                     int64_t stride, int64_t sr, int64_t sc, int64_t m,
                     int64_t k, int64_t picks, size_t itemsize, void* out,
                     const Stream& s);

} // namespace kiln::cuda
