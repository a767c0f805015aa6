// Source generation for the CPU JIT: one C++ function per fused region,
// layout and dtypes. The generated code calls the functors of the op tables
// (embedded at build time), so fused and unfused kernels compute alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/backend/common/compiled_region.h"
#include "kiln/backend/common/jit_disk.h"

namespace kiln::detail {

/** Signature of every generated kernel. Contiguous kernels run elements
 *  [begin, end) and ignore shape/strides; strided kernels run rows [begin,
 *  end) of the collapsed shape (ndim dims) with input k's strides at
 *  strides[k * ndim], writing row-major outputs. Indices are 64-bit. */
using JitKernel = void (*)(const void* const* in, void* const* out,
                           const int64_t* shape, const int64_t* strides,
                           int ndim, int64_t begin, int64_t end);

/** Strided kernels keep one index per collapsed dimension on the stack. */
inline constexpr int jit_max_dims = 32;

/** The kernel function's source (without the prelude and functors). */
std::string jit_kernel_source(const JitKernelSpec& spec, const std::string& key,
                              const std::string& symbol);

} // namespace kiln::detail
