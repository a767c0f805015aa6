// Copies between layouts (and dtypes) on the CPU.
#pragma once

#include "kiln/core/array.h"

namespace kiln::detail {

/** Allocate out row-major and fill it from in (any strides, any dtype). */
void copy_row_major(const array& in, array& out);

/** a itself when it is row-major and of dtype dt, else a row-major copy
 *  converted to dt (for kernels that read their operands row-major). */
array row_major(const array& a, Dtype dt);
inline array row_major(const array& a) { return row_major(a, a.dtype()); }

/** Write src (with src's strides, converted to dst's dtype) into dst's buffer
 *  at element offset dst_offset with dst_strides; dst must be allocated. */
void copy_into(const array& src, array& dst, const Strides& dst_strides,
               int64_t dst_offset);

} // namespace kiln::detail
