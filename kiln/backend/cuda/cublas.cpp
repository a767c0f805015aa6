#include "kiln/backend/cuda/cublas.h"

#include <cublas_v2.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "kiln/backend/cuda/toolkit_library.h"
#include "kiln/backend/cuda/device.h"

namespace kiln::cuda::cublas {

namespace {

// The entry points kiln uses, resolved from the loaded library (the _v2
// names are the exported ones).
struct Api {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasStrsm_v2) strsm = nullptr;
  decltype(&cublasDtrsm_v2) dtrsm = nullptr;
};

#define KILN_RESOLVE(field, symbol) resolve(lib, #symbol, a.field)

const Api* api() {
  static const Api* loaded = []() -> const Api* {
    static Api a;
    void* lib = open_toolkit_library(
        "KILN_CUBLAS_LIBRARY", {"libcublas.so.13", "libcublas.so.12"},
        [](void* lib) {
          return KILN_RESOLVE(create, cublasCreate_v2) &&
                 KILN_RESOLVE(set_stream, cublasSetStream_v2) &&
                 KILN_RESOLVE(strsm, cublasStrsm_v2) &&
                 KILN_RESOLVE(dtrsm, cublasDtrsm_v2);
        });
    return lib ? &a : nullptr;
  }();
  return loaded;
}

#undef KILN_RESOLVE

void check(cublasStatus_t r, const char* what) {
  if (r == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("[linalg] cuBLAS ") + what +
                           " failed (status " +
                           std::to_string(static_cast<int>(r)) + ")");
}

} // namespace

bool available() { return api() != nullptr; }

void trsm(bool upper, int64_t n, int64_t nrhs, int64_t batch, Dtype dt,
          const void* a, void* b, const Stream& s) {
  const Api* lib = api();
  if (!lib) throw std::runtime_error("[linalg] cuBLAS is not available");
  // One handle for the process (kiln uses one GPU), bound to the caller's
  // stream per call under the lock; alpha is read from the host.
  static std::mutex mutex;
  static cublasHandle_t handle = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!handle) check(lib->create(&handle), "handle creation");
  check(lib->set_stream(handle, cuda_stream(s)), "stream binding");
  cublasFillMode_t fill =
      upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  int ni = static_cast<int>(n), ri = static_cast<int>(nrhs);
  for (int64_t i = 0; i < batch; ++i) {
    if (dt == float64) {
      const double one = 1;
      auto* ai = static_cast<const double*>(a) + i * n * n;
      auto* bi = static_cast<double*>(b) + i * n * nrhs;
      check(lib->dtrsm(handle, CUBLAS_SIDE_LEFT, fill, CUBLAS_OP_N,
                       CUBLAS_DIAG_NON_UNIT, ni, ri, &one, ai, ni, bi, ni),
            "trsm");
    } else {
      const float one = 1;
      auto* ai = static_cast<const float*>(a) + i * n * n;
      auto* bi = static_cast<float*>(b) + i * n * nrhs;
      check(lib->strsm(handle, CUBLAS_SIDE_LEFT, fill, CUBLAS_OP_N,
                       CUBLAS_DIAG_NON_UNIT, ni, ri, &one, ai, ni, bi, ni),
            "trsm");
    }
  }
}

} // namespace kiln::cuda::cublas
