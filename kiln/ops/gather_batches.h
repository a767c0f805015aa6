// What gather_mm and gather_qmm share: flat batch indices (the index
// arrays checked, or every batch matrix in order when absent) and operands
// with their batch dimensions flattened.
#pragma once

#include <optional>
#include <string>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::detail {

/** idx as uint32 (an integer array, raising for op otherwise, naming it
 *  `name` and the operands `operands`), or an arange over x's batch
 *  dimensions (all but the last two), shaped as them, when absent. */
array batch_indices(const std::optional<array>& idx, const array& x,
                    const char* op, const char* name,
                    const std::string& operands, StreamOrDevice s);

/** x (..., R, C) as (batch, R, C), its batch flattened (written with -1,
 *  so a shapeless compile replays it at a new batch size). */
array flat_batch(const array& x, StreamOrDevice s);

} // namespace kiln::detail
