// Error checks for every CUDA runtime, driver, NVRTC and cuBLAS call: a
// failure throws std::runtime_error naming the call and the library's
// message, never aborts.
#pragma once

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <string>
#include <vector>

namespace kiln::cuda {

/** The few driver-API functions kiln calls, found through the runtime
 *  (cudaGetDriverEntryPointByVersion) rather than linked: a binary linked to
 *  libcuda cannot even start on a machine without a GPU driver, where the
 *  GPU tests must skip instead. Only decltype names the driver symbols. */
struct DriverApi {
  decltype(&::cuLaunchKernel) launch_kernel;
  decltype(&::cuFuncSetAttribute) func_set_attribute;
  decltype(&::cuModuleLoadDataEx) module_load_data_ex;
  decltype(&::cuModuleGetFunction) module_get_function;
  decltype(&::cuModuleUnload) module_unload;
  decltype(&::cuGetErrorName) get_error_name;
  decltype(&::cuGetErrorString) get_error_string;
};
/** Loaded at first use; throws std::runtime_error when the driver lacks a
 *  function. */
const DriverApi& driver();

/** A driver function by name with the prototype of CUDA version `version`
 *  (e.g. 12040), or nullptr when this driver lacks it. */
void* driver_entry(const char* name, int version);

/** Loads a module image (a cubin, or PTX text ending in a NUL) into the
 *  current context. Returns nullptr when the driver refuses it, with the
 *  driver's log in `*error_log`. A loaded module stays loaded for the life
 *  of the process: its kernels may be in flight at exit. */
CUmodule load_module_image(const void* image, std::string* error_log);

/** The module's functions named `names` (lowered or extern "C" names), in
 *  that order; empty, with the module unloaded, when one is missing. */
std::vector<CUfunction> module_functions(CUmodule mod,
                                         const std::vector<std::string>& names);

[[noreturn]] void throw_cuda_error(const char* call, cudaError_t e);
[[noreturn]] void throw_cu_error(const char* call, CUresult e);
[[noreturn]] void throw_nvrtc_error(const char* call, nvrtcResult e);
[[noreturn]] void throw_cublas_error(const char* call, cublasStatus_t e);

} // namespace kiln::cuda

#define KILN_CHECK_CUDA(call)                                         \
  do {                                                                \
    cudaError_t kiln_err_ = (call);                                   \
    if (kiln_err_ != cudaSuccess) {                                   \
      ::kiln::cuda::throw_cuda_error(#call, kiln_err_);               \
    }                                                                 \
  } while (0)
#define KILN_CHECK_CU(call)                                           \
  do {                                                                \
    CUresult kiln_err_ = (call);                                      \
    if (kiln_err_ != CUDA_SUCCESS) {                                  \
      ::kiln::cuda::throw_cu_error(#call, kiln_err_);                 \
    }                                                                 \
  } while (0)
#define KILN_CHECK_NVRTC(call)                                        \
  do {                                                                \
    nvrtcResult kiln_err_ = (call);                                   \
    if (kiln_err_ != NVRTC_SUCCESS) {                                 \
      ::kiln::cuda::throw_nvrtc_error(#call, kiln_err_);              \
    }                                                                 \
  } while (0)
#define KILN_CHECK_CUBLAS(call)                                       \
  do {                                                                \
    cublasStatus_t kiln_err_ = (call);                                \
    if (kiln_err_ != CUBLAS_STATUS_SUCCESS) {                         \
      ::kiln::cuda::throw_cublas_error(#call, kiln_err_);             \
    }                                                                 \
  } while (0)
