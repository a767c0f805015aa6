// What the CPU JIT needs from the machine: the compiler (found on PATH,
// started with an argv, never through a shell), the libm declarations with
// libmvec's SIMD forms where this machine has them, and the CPU's identity.
#pragma once

#include <string>
#include <vector>

namespace kiln::detail {

/** name as given when it holds a '/', else its first match on $PATH; ""
 *  when there is no such executable file. */
std::string find_program(const std::string& name);

/** A program's identity without running it (starting a process would cost
 *  more than loading a cached kernel): real path, size and mtime. */
std::string program_id(const std::string& path);

/** The CPU model and feature flags (kernels are built -march=native). */
std::string cpu_features();

/** C declarations of the libm functions the functors call and the std::
 *  overloads over them; SIMD where libmvec has every x86 width of the
 *  function (then libmvec is its path, to link the kernel with). */
std::string math_declarations(std::string& libmvec);

/** Runs argv[0] with argv, collecting stdout and stderr in output. Returns
 *  the exit status, or -1 when it could not start or was killed. */
int run_program(const std::vector<std::string>& argv, std::string& output);

} // namespace kiln::detail
