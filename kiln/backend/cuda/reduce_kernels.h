// Names and instantiations of the reduction kernels (device/reduce.cuh),
// shared by the launchers and the ahead-of-time table so both agree.
// Names: {shape}{op}{in dtype}[_{out dtype}][_i64], the shape a letter:
// "w" row_reduce with a warp per output, "r" with a block, "c" col_reduce,
// "C" col_reduce with col_vec_width columns per thread (for ArgMax/ArgMin:
// "w", "r" arg_reduce_row, "c" arg_reduce_col). A second
// pass over partials is the same kernel with the accumulator's dtype as
// input (e.g. "rSumfloat32_float16" combines float16 sums' partials).
#pragma once

#include <string>

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** Columns per thread of the "C" column kernel: one 16-byte load (at most
 *  8 elements, so its shared lanes stay small). */
inline int col_vec_width(Dtype in) { return in.size >= 2 ? 16 / in.size : 8; }

/** op: the reduce type's name, "Sum", "Prod", "Max", "Min", "And", "Or". */
JitKernel reduce_kernel(char shape, const std::string& op, Dtype in,
                        Dtype out, bool large = false);

/** The dtype a reduction accumulates in: float for float16/bfloat16, bool
 *  for and/or, else the output's (sum, prod) or input's (max, min) dtype.
 *  Partials are stored in it. */
Dtype reduce_acc_dtype(const std::string& op, Dtype in, Dtype out);

/** op: "ArgMax" or "ArgMin"; the output is uint32. */
JitKernel arg_reduce_kernel(char shape, const std::string& op, Dtype in,
                            bool large = false);

JitKernel number_of_elements_kernel(Dtype out);

} // namespace kiln::cuda
