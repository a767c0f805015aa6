// compile's log: what it fused, what the JIT built and why a region split,
// kept for the tests and printed under KILN_DEBUG. In core so the backends'
// kernel generators log without depending on the transformations.
#pragma once

#include <string>
#include <vector>

namespace kiln::detail {

/** Records a line; prints it too when KILN_DEBUG >= level. */
void compile_log(int level, const std::string& line);
std::vector<std::string> compile_log_lines();
void clear_compile_log_lines();

} // namespace kiln::detail
