// The JIT build's link to the CUDA runtime, cuBLASLt and NVRTC: each entry
// point kiln calls is defined here and forwards to the library loaded at
// run time, so the library (and a wheel holding it) loads on machines
// without them, where the GPU is simply unavailable and says why
// (toolkit_library.h). The signatures are the headers' own: a definition
// that drifted from its declaration does not compile. The AOT build links
// the libraries instead, since nvcc's kernel registration needs cudart.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "kiln/backend/cuda/toolkit_library.h"

namespace kiln::cuda {
namespace {

// What a call returns when its library did not load: never reached through
// kiln (the GPU is unavailable then), but defined rather than a crash.
template <typename R>
R not_loaded();
template <>
cudaError_t not_loaded() {
  return cudaErrorSharedObjectInitFailed;
}
template <>
cublasStatus_t not_loaded() {
  return CUBLAS_STATUS_NOT_INITIALIZED;
}
template <>
nvrtcResult not_loaded() {
  return NVRTC_ERROR_BUILTIN_OPERATION_FAILURE;
}
template <>
const char* not_loaded() {
  return "the CUDA library was not loaded";
}

template <typename F>
F entry(ToolkitPart part, const char* name) {
  void* lib = toolkit_part(part);
  void* f = nullptr;
  if (lib) resolve_symbol(lib, name, f);
  return reinterpret_cast<F>(f);
}

} // namespace
} // namespace kiln::cuda

#define KILN_NAME(x) #x
#define KILN_FORWARD(part, ret, name, params, args)                        \
  ret name params {                                                        \
    using F = ret(*) params;                                               \
    static const F f =                                                     \
        kiln::cuda::entry<F>(kiln::cuda::ToolkitPart::part, KILN_NAME(name)); \
    return f ? f args : kiln::cuda::not_loaded<ret>();                     \
  }

extern "C" {

KILN_FORWARD(runtime, cudaError_t, cudaDeviceSynchronize, (void), ())
KILN_FORWARD(runtime, cudaError_t, cudaEventCreate, (cudaEvent_t * e), (e))
KILN_FORWARD(runtime, cudaError_t, cudaEventCreateWithFlags,
             (cudaEvent_t * e, unsigned int flags), (e, flags))
KILN_FORWARD(runtime, cudaError_t, cudaEventDestroy, (cudaEvent_t e), (e))
KILN_FORWARD(runtime, cudaError_t, cudaEventElapsedTime,
             (float* ms, cudaEvent_t start, cudaEvent_t end),
             (ms, start, end))
KILN_FORWARD(runtime, cudaError_t, cudaEventQuery, (cudaEvent_t e), (e))
KILN_FORWARD(runtime, cudaError_t, cudaEventRecord,
             (cudaEvent_t e, cudaStream_t s), (e, s))
KILN_FORWARD(runtime, cudaError_t, cudaEventSynchronize, (cudaEvent_t e), (e))
KILN_FORWARD(runtime, cudaError_t, cudaFree, (void* p), (p))
KILN_FORWARD(runtime, cudaError_t, cudaFreeAsync, (void* p, cudaStream_t s),
             (p, s))
KILN_FORWARD(runtime, cudaError_t, cudaGetDeviceCount, (int* n), (n))
KILN_FORWARD(runtime, cudaError_t, cudaGetDeviceProperties,
             (struct cudaDeviceProp * prop, int device), (prop, device))
KILN_FORWARD(runtime, cudaError_t, cudaGetDriverEntryPointByVersion,
             (const char* symbol, void** fn, unsigned int version,
              unsigned long long flags,
              enum cudaDriverEntryPointQueryResult* status),
             (symbol, fn, version, flags, status))
KILN_FORWARD(runtime, const char*, cudaGetErrorName, (cudaError_t e), (e))
KILN_FORWARD(runtime, const char*, cudaGetErrorString, (cudaError_t e), (e))
KILN_FORWARD(runtime, cudaError_t, cudaGetLastError, (void), ())
KILN_FORWARD(runtime, cudaError_t, cudaMalloc, (void** p, size_t n), (p, n))
KILN_FORWARD(runtime, cudaError_t, cudaMallocAsync,
             (void** p, size_t n, cudaStream_t s), (p, n, s))
KILN_FORWARD(runtime, cudaError_t, cudaMemcpyAsync,
             (void* dst, const void* src, size_t n, enum cudaMemcpyKind kind,
              cudaStream_t s),
             (dst, src, n, kind, s))
KILN_FORWARD(runtime, cudaError_t, cudaMemsetAsync,
             (void* p, int value, size_t n, cudaStream_t s), (p, value, n, s))
KILN_FORWARD(runtime, cudaError_t, cudaSetDevice, (int device), (device))
KILN_FORWARD(runtime, cudaError_t, cudaStreamCreateWithFlags,
             (cudaStream_t * s, unsigned int flags), (s, flags))
KILN_FORWARD(runtime, cudaError_t, cudaStreamSynchronize, (cudaStream_t s),
             (s))
KILN_FORWARD(runtime, cudaError_t, cudaStreamWaitEvent,
             (cudaStream_t s, cudaEvent_t e, unsigned int flags), (s, e, flags))

KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * h),
             (h))
KILN_FORWARD(blas_lt, const char*, cublasLtGetStatusName, (cublasStatus_t s),
             (s))
KILN_FORWARD(blas_lt, const char*, cublasLtGetStatusString,
             (cublasStatus_t s), (s))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatmul,
             (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha,
              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
              cublasLtMatrixLayout_t c_layout, void* d,
              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
              void* workspace, size_t workspace_bytes, cudaStream_t s),
             (h, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d,
              d_layout, algo, workspace, workspace_bytes, s))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
             (cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
              cublasLtMatmulPreference_t pref, int requested,
              cublasLtMatmulHeuristicResult_t results[], int* returned),
             (h, desc, a, b, c, d, pref, requested, results, returned))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatmulDescCreate,
             (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute,
              cudaDataType_t scale),
             (desc, compute, scale))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
             (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
              const void* buf, size_t n),
             (desc, attr, buf, n))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatmulPreferenceCreate,
             (cublasLtMatmulPreference_t * pref), (pref))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatmulPreferenceDestroy,
             (cublasLtMatmulPreference_t pref), (pref))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
             (cublasLtMatmulPreference_t pref,
              cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
              size_t n),
             (pref, attr, buf, n))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatrixLayoutCreate,
             (cublasLtMatrixLayout_t * layout, cudaDataType type,
              uint64_t rows, uint64_t cols, int64_t ld),
             (layout, type, rows, cols, ld))
KILN_FORWARD(blas_lt, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
             (cublasLtMatrixLayout_t layout,
              cublasLtMatrixLayoutAttribute_t attr, const void* buf, size_t n),
             (layout, attr, buf, n))

KILN_FORWARD(nvrtc, nvrtcResult, nvrtcAddNameExpression,
             (nvrtcProgram p, const char* const name), (p, name))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcCompileProgram,
             (nvrtcProgram p, int n, const char* const* options),
             (p, n, options))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcCreateProgram,
             (nvrtcProgram * p, const char* src, const char* name, int n,
              const char* const* headers, const char* const* include_names),
             (p, src, name, n, headers, include_names))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * p), (p))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram p, char* cubin),
             (p, cubin))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcGetCUBINSize,
             (nvrtcProgram p, size_t* n), (p, n))
KILN_FORWARD(nvrtc, const char*, nvrtcGetErrorString, (nvrtcResult r), (r))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcGetLoweredName,
             (nvrtcProgram p, const char* const expr, const char** lowered),
             (p, expr, lowered))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcGetProgramLog,
             (nvrtcProgram p, char* log), (p, log))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcGetProgramLogSize,
             (nvrtcProgram p, size_t* n), (p, n))
KILN_FORWARD(nvrtc, nvrtcResult, nvrtcVersion, (int* major, int* minor),
             (major, minor))

} // extern "C"
