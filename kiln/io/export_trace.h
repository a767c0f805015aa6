// Tracing a function for export, shared by the file writer and the
// callback form (internal).
#pragma once

#include <unordered_set>
#include <vector>

#include "kiln/io/function_export.h"

namespace kiln::detail {

/** A function traced for export: its tracers (one per input), outputs,
 *  the tape in evaluation order, and the constants the tape reads. */
struct Traced {
  std::vector<array> tracers, outputs, tape, constants;
  std::unordered_set<uintptr_t> tracer_ids;
};

Traced trace_for_export(const ExportedFn& fun, const Args& args,
                        const Kwargs& kwargs, bool shapeless);

} // namespace kiln::detail
