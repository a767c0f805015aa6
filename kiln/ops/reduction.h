// Reductions over any set of axes, arg-reductions and scans.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

// Each reduction comes in three forms, as in MLX: over all axes, over a list
// of axes, over one axis.
#define KILN_REDUCTION(name)                                                  \
  array name(const array& a, bool keepdims = false, StreamOrDevice s = {});  \
  array name(const array& a, const std::vector<int>& axes,                    \
             bool keepdims = false, StreamOrDevice s = {});                   \
  array name(const array& a, int axis, bool keepdims = false,                 \
             StreamOrDevice s = {});
KILN_REDUCTION(sum)
KILN_REDUCTION(prod)
KILN_REDUCTION(mean)
KILN_REDUCTION(max)
KILN_REDUCTION(min)
KILN_REDUCTION(all)
KILN_REDUCTION(any)
KILN_REDUCTION(logsumexp)
#undef KILN_REDUCTION

/** Variance with ddof delta degrees of freedom. */
array var(const array& a, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array var(const array& a, const std::vector<int>& axes, bool keepdims = false,
          int ddof = 0, StreamOrDevice s = {});
array var(const array& a, int axis, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array std(const array& a, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array std(const array& a, const std::vector<int>& axes, bool keepdims = false,
          int ddof = 0, StreamOrDevice s = {});
array std(const array& a, int axis, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});

/** Sum of the diagonal at offset of the 2-d sub-arrays over axis1 and axis2,
 *  cast to dtype when given (integers sum as sum does). */
array trace(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1,
            std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});

/** The median over axes (all axes by default), in floating point (integers
 *  become float32); NaN where the values include NaN. */
array median(const array& a, bool keepdims = false, StreamOrDevice s = {});
array median(const array& a, const std::vector<int>& axes,
             bool keepdims = false, StreamOrDevice s = {});
array median(const array& a, int axis, bool keepdims = false,
             StreamOrDevice s = {});

/** min and max over the same axes, in that order. */
std::pair<array, array> minmax(const array& a, bool keepdims = false,
                               StreamOrDevice s = {});
std::pair<array, array> minmax(const array& a, const std::vector<int>& axes,
                               bool keepdims = false, StreamOrDevice s = {});

/** Number of nonzero elements over axes, as int32. */
array count_nonzero(const array& a, bool keepdims = false,
                    StreamOrDevice s = {});
array count_nonzero(const array& a, const std::vector<int>& axes,
                    bool keepdims = false, StreamOrDevice s = {});

/** Index of the first maximum / minimum (uint32), over the flattened array
 *  or along one axis. */
array argmax(const array& a, bool keepdims = false, StreamOrDevice s = {});
array argmax(const array& a, int axis, bool keepdims = false,
             StreamOrDevice s = {});
array argmin(const array& a, bool keepdims = false, StreamOrDevice s = {});
array argmin(const array& a, int axis, bool keepdims = false,
             StreamOrDevice s = {});

/** Scans along one axis; inclusive unless exclusive is set, optionally from
 *  the end. */
#define KILN_SCAN(name)                                                   \
  array name(const array& a, int axis, bool reverse = false,              \
             bool inclusive = true, StreamOrDevice s = {});               \
  array name(const array& a, bool reverse = false, bool inclusive = true, \
             StreamOrDevice s = {});
KILN_SCAN(cumsum)
KILN_SCAN(cumprod)
KILN_SCAN(cummax)
KILN_SCAN(cummin)
/** The running log(sum(exp(a))), computed stably (integers become
 *  float32; an exclusive scan starts at -inf). */
KILN_SCAN(logcumsumexp)
#undef KILN_SCAN

} // namespace kiln
