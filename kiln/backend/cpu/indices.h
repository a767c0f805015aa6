// Reading integer index arrays and preparing in-place outputs, shared by the
// slicing, indexing and sorting kernels.
#pragma once

#include <vector>

#include "kiln/core/array.h"

namespace kiln::detail {

/** The values of an integer array (any dtype, any strides) as int64, in
 *  row-major order. */
std::vector<int64_t> index_values(const array& idx);

/** Give out the contents of src: src's own buffer when nothing else can see
 *  it and no two elements share a slot (so writes stay private), else a
 *  row-major copy. */
void copy_or_donate(const array& src, array& out);

} // namespace kiln::detail
