// NumPy-like printing of arrays: array([[1, 2],
//                                       [3, 4]], dtype=int32)
#pragma once

#include <ostream>

#include "kiln/core/array.h"

namespace kiln {

/** Evaluates a and prints it. */
std::ostream& operator<<(std::ostream& os, array a);

} // namespace kiln
