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
// the dtype (raw for Scatter); the passes that keep the last of colliding
// assignments are {v|g}Scatter{Mark|Write}{S|E}{N}..., S for cells per
// start, E per element. gGatherAxis{elem}_{index} and
// g{ScatterAxis...}{elem}_{index} likewise (ScatterAxis{Mark|Write}).
// "_i64": 64-bit positions.
#pragma once

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"
#include "kiln/primitives/indexing.h"

namespace kiln::cuda {

/** The unsigned dtype of dt's size: kernels that only move elements are
 *  compiled once per element size. */
Dtype raw_dtype(Dtype dt);

/** The passes of a scatter that assigns (device/indexing.cuh's Ownership):
 *  Direct stores every update; when updates may collide, Mark then Write
 *  keep the last index position's, as the CPU does. */
enum class ScatterPass { Direct, Mark, Write };

JitKernel gather_kernel(Dtype dt, Dtype index, int num_indices,
                        bool index_contiguous, bool slice_contiguous,
                        bool large);
/** per_start: Mark/Write cells are starts (slices of size 1 along every
 *  indexed axis cannot partly overlap), else output elements. */
JitKernel scatter_kernel(ScatterReduce r, Dtype dt, Dtype index,
                         int num_indices, bool contiguous, bool large,
                         ScatterPass pass = ScatterPass::Direct,
                         bool per_start = false);
JitKernel gather_axis_kernel(Dtype dt, Dtype index, bool large);
JitKernel scatter_axis_kernel(ScatterReduce r, Dtype dt, Dtype index,
                              bool large,
                              ScatterPass pass = ScatterPass::Direct);

} // namespace kiln::cuda
