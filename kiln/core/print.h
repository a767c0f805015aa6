// NumPy-like printing of arrays: array([[1, 2],
//                                       [3, 4]], dtype=int32)
#pragma once

#include <ostream>

#include "kiln/core/array.h"

namespace kiln {

/** How arrays print. precision: digits after the decimal point of floating
 *  and complex values (fixed notation), or -1 for the default (6
 *  significant digits). */
struct PrintOptions {
  int precision = -1;
};
PrintOptions get_print_options();
void set_print_options(const PrintOptions& options);

/** Evaluates a and prints it. */
std::ostream& operator<<(std::ostream& os, array a);

} // namespace kiln
