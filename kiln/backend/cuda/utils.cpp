#include "kiln/backend/cuda/utils.h"

#include <stdexcept>

namespace kiln::cuda {

void throw_cuda_error(const char* call, cudaError_t e) {
  throw std::runtime_error(std::string("[cuda] ") + call + " failed: " +
                           cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                           ").");
}

void throw_cu_error(const char* call, CUresult e) {
  const char* name = nullptr;
  const char* msg = nullptr;
  cuGetErrorName(e, &name);
  cuGetErrorString(e, &msg);
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
