// Source generation for the CPU JIT: one C++ function per fused region,
// layout and dtypes. The generated code calls the functors of functors.h
// (embedded at build time), so fused and unfused kernels compute alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/backend/common/jit_disk.h"
#include "kiln/primitives/compiled.h"

namespace kiln::detail {

/** How a kernel reads one external input. */
enum class JitRole : char {
  constant = 'k', // baked into the source as a literal
  scalar = 's',   // one element, read once
  vector = 'v',   // contiguous kernel: element i
  strided = 'g',  // strided kernel: through its strides
};

/** Everything a kernel's code depends on. */
struct JitKernelSpec {
  const Compiled* region;
  std::vector<Dtype> input_dtypes;
  std::vector<JitRole> roles;
  bool contiguous; // flat loop over data_size, else collapsed strided loop
};

/** Signature of every generated kernel. Contiguous kernels run elements
 *  [begin, end) and ignore shape/strides; strided kernels run rows [begin,
 *  end) of the collapsed shape (ndim dims) with input k's strides at
 *  strides[k * ndim], writing row-major outputs. Indices are 64-bit. */
using JitKernel = void (*)(const void* const* in, void* const* out,
                           const int64_t* shape, const int64_t* strides,
                           int ndim, int64_t begin, int64_t end);

/** Strided kernels keep one index per collapsed dimension on the stack. */
inline constexpr int jit_max_dims = 32;

/** The cache key: roles, dtypes, constants' bits, each op's primitive,
 *  dtype and arguments, and the outputs, spelled out. */
std::string jit_kernel_key(const JitKernelSpec& spec);

/** A C identifier for the kernel: readable op names and a hash of the key. */
std::string jit_kernel_symbol(const JitKernelSpec& spec,
                              const std::string& key);

/** Whether the JIT can generate this region (real dtypes, known ops). */
bool jit_supports(const JitKernelSpec& spec);

/** The kernel function's source (without the prelude and functors). */
std::string jit_kernel_source(const JitKernelSpec& spec, const std::string& key,
                              const std::string& symbol);

} // namespace kiln::detail
