// What both backends' fused-region generators share: how a kernel reads each
// external input (its role), the layout decision for a region's call (flat
// over a shared contiguous layout, or strided over the collapsed shape, which
// the GPU may run as rows of row- and column-broadcast inputs), and the key
// and readable symbol naming a generated kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/layout.h"
#include "kiln/primitives/compiled.h"

namespace kiln::detail {

/** How a kernel reads one external input. */
enum class JitRole : char {
  constant = 'k', // baked into the source as a literal
  scalar = 's',   // one element, read once
  vector = 'v',   // contiguous kernel: element i
  strided = 'g',  // strided kernel: through its strides
  row = 'r',      // rows kernel: one value per row, element i / n
  column = 'c',   // rows kernel: one value per column, element i % n
  // The CPU's strided kernel, by the input's stride along the innermost
  // collapsed axis, spelled into the loop so that it vectorizes:
  inner_unit = 'u',   // through its strides, consecutive along the row
  inner_repeat = 'z', // through its strides, one value along the row
};

/** Everything a kernel's code depends on. */
struct JitKernelSpec {
  const Compiled* region;
  std::vector<Dtype> input_dtypes;
  std::vector<JitRole> roles;
  bool contiguous; // flat loop over data_size, else collapsed strided loop
  // Not contiguous, run by the GPU's rows kernel (rows_layout) with vectors
  // of this many elements; 0: the strided kernel.
  int rows_width = 0;
};

/** A short code for a dtype in keys and symbols ("f32", "bf16", "b"). */
const char* dtype_code(Dtype d);

/** The cache key: roles, dtypes, constants' bits, each op's primitive,
 *  dtype and arguments, and the outputs, spelled out. */
std::string jit_kernel_key(const JitKernelSpec& spec);

/** A C identifier for the kernel: readable op names and a hash of the key. */
std::string jit_kernel_symbol(const JitKernelSpec& spec,
                              const std::string& key);

/** Whether a generator can handle this region (real dtypes, elementwise
 *  primitives whose functors carry their names). */
bool jit_supports(const JitKernelSpec& spec);

/** A constant's bits as a C++ hex literal ("0x3f800000ull"): both
 *  generators spell constants by their bits, so no precision is lost. */
std::string hex_literal(uint64_t bits);

/** One call's layout decision. When every non-scalar input shares one
 *  contiguous layout (same strides and data size), the kernel runs flat over
 *  `flat.data_size` elements and the outputs take `out_strides` and `flat`;
 *  otherwise it walks `shape` (collapsed) with `strides[k]` for input k
 *  (zeros unless its role is strided; the last entry is the row-major
 *  outputs') and writes row-major outputs. */
struct CompiledLayout {
  JitKernelSpec spec;
  // Flat case: the input whose layout the outputs inherit (-1: none, all
  // constants) and that layout.
  int layout_input = -1;
  Layout flat{1, {true, true, true}};
  Strides out_strides;
  // Strided case.
  Shape shape;
  std::vector<Strides> strides;
};

/** The layout decision for region c called on inputs, whose broadcast shape
 *  is `shape`. */
CompiledLayout compiled_layout(const Compiled& c,
                               const std::vector<array>& inputs,
                               const Shape& shape);

/** Whether a strided decision can run as rows: the collapsed shape is
 *  (rows, n) and every strided input is row-major over it (strides (n, 1)),
 *  one value per row (a (..., 1) broadcast along the last axis: (1, 0)) or
 *  one per column (an (n,) broadcast over the rows: (0, 1)). The outputs are
 *  row-major then, as in every strided decision, so element i of the flat
 *  loop reads element i, i / n or i % n. If so the strided roles become
 *  vector, row and column (the strides stay); else l is left as it is. Does
 *  not allocate. */
bool rows_layout(CompiledLayout& l);

} // namespace kiln::detail
