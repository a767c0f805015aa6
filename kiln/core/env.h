// Settings read from the environment (KILN_DEBUG, KILN_CUDNN_CONV=0, ...),
// each kind parsed one way everywhere.
#pragma once

#include <string>

namespace kiln::env {

/** The variable's value, empty when it is unset. */
std::string value(const char* name);

/** A switch: unset or empty gives `fallback`, "0" turns it off, any other
 *  value on. */
bool flag(const char* name, bool fallback);

/** KILN_DEBUG's level: 0 when unset or not a number; read once. */
int debug_level();

} // namespace kiln::env
