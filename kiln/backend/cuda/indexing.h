// Names and instantiations of the gather and scatter kernels
// (device/indexing.cuh). These are always compiled by NVRTC, in both builds:
// one variant per number of index arrays, index dtype, element type, layout
// and position width is too many to build ahead of time.
//
// Names: {v|g}{v|g}Gather{N}{elem}_{index}: N index arrays; the letters say
// whether the index arrays are row-major (v) and whether a slice is one run
// of stride 1 in the source (v); elem is the unsigned type of the element's
// size (a gather moves raw elements). {v|g}{Prim}{N}{elem}_{index} for
// Scatter/ScatterSum/ScatterProd/ScatterMax/ScatterMin: v when index arrays
// and updates are row-major and a slice is one run in the output; elem is
// the dtype (raw for Scatter). gGatherAxis{elem}_{index} and
// g{ScatterAxis...}{elem}_{index} likewise. "_i64": 64-bit positions.
#pragma once

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"
#include "kiln/primitives/indexing.h"

namespace kiln::cuda {

/** The unsigned dtype of dt's size: kernels that only move elements are
 *  compiled once per element size. */
Dtype raw_dtype(Dtype dt);

JitKernel gather_kernel(Dtype dt, Dtype index, int num_indices,
                        bool index_contiguous, bool slice_contiguous,
                        bool large);
JitKernel scatter_kernel(ScatterReduce r, Dtype dt, Dtype index,
                         int num_indices, bool contiguous, bool large);
JitKernel gather_axis_kernel(Dtype dt, Dtype index, bool large);
JitKernel scatter_axis_kernel(ScatterReduce r, Dtype dt, Dtype index,
                              bool large);

} // namespace kiln::cuda
