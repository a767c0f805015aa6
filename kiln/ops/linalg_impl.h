// Internals shared by the linalg op files: the stream LAPACK runs on, the
// argument checks of the factorizations, and LU's three outputs.
#pragma once

#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::detail {

/** A stack of float32/float64 matrices (square when asked); throws naming
 *  op otherwise. */
/** Raises unless a is a batch of (square) float32/float64 matrices, or
 *  complex64 ones where complex_ok. */
void check_matrices(const char* op, const array& a, bool square,
                    bool complex_ok = false);

/** The outputs of the LUF primitive: {LU, pivots, perm}. */
std::vector<array> lu_outputs(const array& a, StreamOrDevice s);

} // namespace kiln::detail
