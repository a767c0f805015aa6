#include "kiln/backend/cuda/utils.h"

#include <stdexcept>

namespace kiln::cuda {

namespace {

template <typename F>
void load_entry(const char* name, F& f) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status;
  // 12000: the prototypes of CUDA 12.0, unchanged for these functions.
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000,
                                                   cudaEnableDefault, &status);
  if (e != cudaSuccess || status != cudaDriverEntryPointSuccess || !p) {
    cudaGetLastError();
    throw std::runtime_error(std::string("[cuda] the GPU driver does not "
                                         "provide ") + name + ".");
  }
  f = reinterpret_cast<F>(p);
}

} // namespace

void* driver_entry(const char* name, int version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault,
                                       &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi d;
    load_entry("cuLaunchKernel", d.launch_kernel);
    load_entry("cuFuncSetAttribute", d.func_set_attribute);
    load_entry("cuModuleLoadDataEx", d.module_load_data_ex);
    load_entry("cuModuleGetFunction", d.module_get_function);
    load_entry("cuModuleUnload", d.module_unload);
    load_entry("cuGetErrorName", d.get_error_name);
    load_entry("cuGetErrorString", d.get_error_string);
    return d;
  }();
  return api;
}

CUmodule load_module_image(const void* image, std::string* error_log) {
  char log[4096] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {log, reinterpret_cast<void*>(sizeof(log))};
  CUmodule mod = nullptr;
  if (driver().module_load_data_ex(&mod, image, 2, opts, vals) !=
      CUDA_SUCCESS) {
    if (error_log) *error_log = log;
    return nullptr;
  }
  return mod;
}

std::vector<CUfunction> module_functions(
    CUmodule mod, const std::vector<std::string>& names) {
  std::vector<CUfunction> fs;
  for (auto& n : names) {
    CUfunction f;
    if (driver().module_get_function(&f, mod, n.c_str()) != CUDA_SUCCESS) {
      driver().module_unload(mod);
      return {};
    }
    fs.push_back(f);
  }
  return fs;
}

void throw_cuda_error(const char* call, cudaError_t e) {
  throw std::runtime_error(std::string("[cuda] ") + call + " failed: " +
                           cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                           ").");
}

void throw_cu_error(const char* call, CUresult e) {
  const char* name = nullptr;
  const char* msg = nullptr;
  driver().get_error_name(e, &name);
  driver().get_error_string(e, &msg);
  throw std::runtime_error(std::string("[cuda] ") + call + " failed: " +
                           (name ? name : "unknown error") + " (" +
                           (msg ? msg : "") + ").");
}

void throw_nvrtc_error(const char* call, nvrtcResult e) {
  throw std::runtime_error(std::string("[nvrtc] ") + call + " failed: " +
                           nvrtcGetErrorString(e) + ".");
}

void throw_cublas_error(const char* call, cublasStatus_t e) {
  throw std::runtime_error(std::string("[cublasLt] ") + call + " failed: " +
                           cublasLtGetStatusName(e) + " (" +
                           cublasLtGetStatusString(e) + ").");
}

} // namespace kiln::cuda
