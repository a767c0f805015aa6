// GPU drivers for elementwise kernels: choose the output layout by the rule
// all backends share (backend/common/elementwise_layout.h), then run the
// contiguous kernel over data_size elements or the general one over the
// collapsed shape.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::cuda {

/** out = op(inputs...) on stream s; one input: unary (op "AsType" converts
 *  to out's dtype), two: binary, three: Select. Returns false, doing
 *  nothing, when the GPU kernels cannot run it (a dtype they lack, more
 *  dimensions than they take) so the caller falls back to the CPU.
 *  row_major forces a row-major output (Contiguous). */
bool elementwise(const char* op, const std::vector<array>& inputs,
                 array& out, const Stream& s, bool row_major = false);

/** Copies src (any strides and dtype) into a new row-major out. Returns
 *  false like elementwise(). */
bool copy_row_major(const array& src, array& out, const Stream& s);

/** copy_row_major, or src's own buffer when it is row-major, dense, of out's
 *  dtype and donatable (donate_device_buffer): the start of an in-place
 *  update such as a scatter or a slice update. */
bool copy_or_donate(const array& src, array& out, const Stream& s);

/** True when copy_into can write src (converted to dtype `to`) through
 *  dst_strides on the GPU (both dtypes supported, few enough dimensions
 *  after collapsing). */
bool can_copy_into(const array& src, Dtype to, const Strides& dst_strides);

/** Writes src (any strides, converted to dst's dtype) into dst's device
 *  buffer as the view dst_strides at element offset dst_offset. Needs
 *  can_copy_into. */
void copy_into(const array& src, array& dst, const Strides& dst_strides,
               int64_t dst_offset, const Stream& s);

/** Sets out to x when x is row-contiguous, else to a row-major copy made on
 *  stream s (what kernels that walk rows read). Returns false like
 *  elementwise(). */
bool row_contiguous(const array& x, array& out, const Stream& s);

} // namespace kiln::cuda
