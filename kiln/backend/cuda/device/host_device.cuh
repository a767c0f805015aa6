// KILN_HOST_DEVICE marks functions of the plain headers that the kernels
// and their host launchers share (flash_tiles.cuh, transpose_blocks.cuh):
// NVRTC and nvcc want them marked for the device too, the host compiler
// knows no such mark.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
