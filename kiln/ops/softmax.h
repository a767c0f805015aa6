// Softmax: a numerically stable exp(a) / sum(exp(a)) over any axes.
#pragma once

#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** Softmax over the given axes; the maximum is subtracted before exp.
 *  precise accumulates float16/bfloat16 inputs in float32; otherwise the
 *  accumulation type is the input's (as MLX). Integers give float32. */
array softmax(const array& a, const std::vector<int>& axes,
              bool precise = false, StreamOrDevice s = {});
/** Softmax over all axes. */
array softmax(const array& a, bool precise = false, StreamOrDevice s = {});
inline array softmax(const array& a, int axis, bool precise = false,
                     StreamOrDevice s = {}) {
  return softmax(a, std::vector<int>{axis}, precise, s);
}

} // namespace kiln
