// Ops that change shape or layout without changing values.
#pragma once

#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** New shape with the same size; one dimension may be -1 (inferred). */
array reshape(const array& a, Shape shape, StreamOrDevice s = {});
/** Merge axes [start_axis, end_axis] into one. */
array flatten(const array& a, int start_axis = 0, int end_axis = -1,
              StreamOrDevice s = {});
/** Split one axis into the given shape (one entry may be -1). */
array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s = {});
array transpose(const array& a, std::vector<int> axes, StreamOrDevice s = {});
/** Reverse the axes. */
array transpose(const array& a, StreamOrDevice s = {});
array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s = {});
array moveaxis(const array& a, int source, int destination,
               StreamOrDevice s = {});
array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s = {});
namespace detail {
/** broadcast_to for an elementwise op's operand (an implicit broadcast, see
 *  primitives/shape.h). */
array broadcast_operand(const array& a, const Shape& shape,
                        StreamOrDevice s = {});
/** broadcast_to(a, like.shape()); while a shapeless compile traces `like`,
 *  a node whose shape keeps following like's on replay. */
array broadcast_like(const array& a, const array& like, StreamOrDevice s = {});
/** reshape(a, like.shape()); while a shapeless compile traces `like`, a
 *  node that keeps following like's shape (and raises when the sizes stop
 *  matching). */
array reshape_like(const array& a, const array& like, StreamOrDevice s = {});
} // namespace detail
std::vector<array> broadcast_arrays(const std::vector<array>& inputs,
                                    StreamOrDevice s = {});
array expand_dims(const array& a, int axis, StreamOrDevice s = {});
array expand_dims(const array& a, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array squeeze(const array& a, StreamOrDevice s = {});
array squeeze(const array& a, int axis, StreamOrDevice s = {});
array squeeze(const array& a, const std::vector<int>& axes,
              StreamOrDevice s = {});
/** A row-major copy (or a no-op when already row-major).
 *  allow_col_major keeps column-major arrays as they are. */
array contiguous(const array& a, bool allow_col_major = false,
                 StreamOrDevice s = {});

/** The same bytes reinterpreted as dtype. With a different itemsize the last
 *  axis scales (it must divide evenly). */
array view(const array& a, Dtype dtype, StreamOrDevice s = {});

} // namespace kiln
