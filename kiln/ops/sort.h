// Sorting, partitioning and top-k along an axis. NaNs order last (as
// NumPy); the arg variants return uint32 positions along the axis.
#pragma once

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** Values sorted along axis. */
array sort(const array& a, int axis, StreamOrDevice s = {});
/** The flattened array, sorted. */
array sort(const array& a, StreamOrDevice s = {});
/** Positions that sort a along axis; stable (equal values keep order). */
array argsort(const array& a, int axis, StreamOrDevice s = {});
array argsort(const array& a, StreamOrDevice s = {});

/** Along axis, the element at kth (negative counts from the end) is the one
 *  a sort would put there; no larger value comes before it and no smaller
 *  one after. The order within each side is unspecified. */
array partition(const array& a, int kth, int axis, StreamOrDevice s = {});
array partition(const array& a, int kth, StreamOrDevice s = {});
array argpartition(const array& a, int kth, int axis, StreamOrDevice s = {});
array argpartition(const array& a, int kth, StreamOrDevice s = {});

/** The k largest values along axis, as the last k of partition(a, -k): not
 *  sorted (the same order as MLX's CPU backend). */
array topk(const array& a, int k, int axis, StreamOrDevice s = {});
array topk(const array& a, int k, StreamOrDevice s = {});

} // namespace kiln
