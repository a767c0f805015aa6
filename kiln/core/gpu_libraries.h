// Whether the GPU backend's libraries loaded: a build with the GPU backend
// loads the CUDA runtime, cuBLASLt and NVRTC at run time, so it installs
// and runs where they are missing (a wheel without its cuda13 extra).
#pragma once

#include <string>

namespace kiln::gpu {

/** What of the CUDA libraries is missing and how to install it; empty when
 *  nothing is, and always in a CPU-only build. While it is not empty, what
 *  asks for the GPU runs on the CPU, with this said once on stderr. */
const std::string& missing_libraries();

} // namespace kiln::gpu
