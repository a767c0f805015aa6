// Sorting, partitioning and top-k along an axis. NaNs order last (as
// NumPy); the arg variants return uint32 positions along the axis.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

/** For each value, the position in the 1-d sorted_sequence that keeps it
 *  sorted: the number of elements less than it ("left") or less than or
 *  equal to it ("right"), as uint32 shaped like values. */
array searchsorted(const array& sorted_sequence, const array& values,
                   const std::string& side = "left", StreamOrDevice s = {});

/** The sorted unique elements of the flattened a, exactly size of them
 *  (truncated, or padded with fill_value: by default the smallest unique
 *  element), followed by those requested of: the index of each value's
 *  first occurrence (uint32), the inverse (uint32, a's shape: the entry of
 *  each element, clamped to the last one kept) and the counts (int32, 0 for
 *  padding). The shapes depend only on size, never on the values. */
std::vector<array> unique(const array& a, int size, bool return_index = false,
                          bool return_inverse = false,
                          bool return_counts = false,
                          const std::optional<array>& fill_value = std::nullopt,
                          StreamOrDevice s = {});

} // namespace kiln
