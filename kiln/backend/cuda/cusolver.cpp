#include "kiln/backend/cuda/cusolver.h"

#include <cusolverDn.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/toolkit_library.h"
#include "kiln/backend/cuda/utils.h"

namespace kiln::cuda::cusolver {

namespace {

// The entry points kiln uses, resolved from the loaded library.
struct Api {
  decltype(&cusolverDnCreate) create = nullptr;
  decltype(&cusolverDnSetStream) set_stream = nullptr;
  decltype(&cusolverDnCreateParams) create_params = nullptr;
  decltype(&cusolverDnXpotrf_bufferSize) potrf_size = nullptr;
  decltype(&cusolverDnXpotrf) potrf = nullptr;
  decltype(&cusolverDnXtrtri_bufferSize) trtri_size = nullptr;
  decltype(&cusolverDnXtrtri) trtri = nullptr;
  decltype(&cusolverDnXgetrf_bufferSize) getrf_size = nullptr;
  decltype(&cusolverDnXgetrf) getrf = nullptr;
  decltype(&cusolverDnXgetrs) getrs = nullptr;
  decltype(&cusolverDnXsyevd_bufferSize) syevd_size = nullptr;
  decltype(&cusolverDnXsyevd) syevd = nullptr;
};

const Api* api() {
  static const Api* loaded = []() -> const Api* {
    static Api a;
    void* lib = open_toolkit_library(
        "KILN_CUSOLVER_LIBRARY", {"libcusolver.so.12", "libcusolver.so.11"},
        [](void* lib) {
          return resolve(lib, "cusolverDnCreate", a.create) &&
                 resolve(lib, "cusolverDnSetStream", a.set_stream) &&
                 resolve(lib, "cusolverDnCreateParams", a.create_params) &&
                 resolve(lib, "cusolverDnXpotrf_bufferSize", a.potrf_size) &&
                 resolve(lib, "cusolverDnXpotrf", a.potrf) &&
                 resolve(lib, "cusolverDnXtrtri_bufferSize", a.trtri_size) &&
                 resolve(lib, "cusolverDnXtrtri", a.trtri) &&
                 resolve(lib, "cusolverDnXgetrf_bufferSize", a.getrf_size) &&
                 resolve(lib, "cusolverDnXgetrf", a.getrf) &&
                 resolve(lib, "cusolverDnXgetrs", a.getrs) &&
                 resolve(lib, "cusolverDnXsyevd_bufferSize", a.syevd_size) &&
                 resolve(lib, "cusolverDnXsyevd", a.syevd);
        });
    return lib ? &a : nullptr;
  }();
  return loaded;
}

void check(cusolverStatus_t r, const char* what) {
  if (r == CUSOLVER_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("[linalg] cuSOLVER ") + what +
                           " failed (status " +
                           std::to_string(static_cast<int>(r)) + ")");
}

// One handle and one params object for the process (kiln uses one GPU),
// bound to the caller's stream per call under the lock.
struct Solver {
  const Api& api;
  std::unique_lock<std::mutex> lock;
  cusolverDnHandle_t handle;
  cusolverDnParams_t params;
};

Solver solver(const Stream& s) {
  const Api* a = api();
  if (!a) throw std::runtime_error("[linalg] cuSOLVER is not available");
  static std::mutex mutex;
  static cusolverDnHandle_t handle = nullptr;
  static cusolverDnParams_t params = nullptr;
  std::unique_lock<std::mutex> lock(mutex);
  if (!handle) {
    check(a->create(&handle), "handle creation");
    check(a->create_params(&params), "params creation");
  }
  check(a->set_stream(handle, cuda_stream(s)), "stream binding");
  return {*a, std::move(lock), handle, params};
}

cudaDataType data_type(Dtype dt) {
  return dt == float64 ? CUDA_R_64F : CUDA_R_32F;
}

cublasFillMode_t fill(bool upper) {
  return upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
}

// The work areas a routine asked for: device memory from kiln's allocator
// on the stream, host memory of its own.
struct Work {
  Work(size_t device_bytes, size_t host_bytes, const Stream& s)
      : device(device_bytes > 0 ? device_bytes : 1, s), host(host_bytes) {}
  Scratch device;
  std::vector<char> host;
};

} // namespace

bool available() { return api() != nullptr; }

bool supports(Dtype dt) {
  return (dt == float32 || dt == float64) && available();
}

void potrf(bool upper, int64_t n, int64_t batch, Dtype dt, void* a, int* info,
           const Stream& s) {
  Solver sv = solver(s);
  cudaDataType t = data_type(dt);
  size_t dev = 0, host = 0;
  check(sv.api.potrf_size(sv.handle, sv.params, fill(upper), n, t, a, n, t,
                          &dev, &host),
        "potrf workspace query");
  Work w(dev, host, s);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.api.potrf(sv.handle, sv.params, fill(upper), n, t,
                       static_cast<char*>(a) + i * n * n * dt.size, n, t,
                       w.device.ptr, dev, w.host.data(), host, info + i),
          "potrf");
  }
}

void trtri(bool upper, int64_t n, int64_t batch, Dtype dt, void* a, int* info,
           const Stream& s) {
  Solver sv = solver(s);
  cudaDataType t = data_type(dt);
  size_t dev = 0, host = 0;
  check(sv.api.trtri_size(sv.handle, fill(upper), CUBLAS_DIAG_NON_UNIT, n, t,
                          a, n, &dev, &host),
        "trtri workspace query");
  Work w(dev, host, s);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.api.trtri(sv.handle, fill(upper), CUBLAS_DIAG_NON_UNIT, n, t,
                       static_cast<char*>(a) + i * n * n * dt.size, n,
                       w.device.ptr, dev, w.host.data(), host, info + i),
          "trtri");
  }
}

void getrf(int64_t n, int64_t batch, Dtype dt, void* a, int64_t* ipiv,
           int* info, const Stream& s) {
  Solver sv = solver(s);
  cudaDataType t = data_type(dt);
  size_t dev = 0, host = 0;
  check(sv.api.getrf_size(sv.handle, sv.params, n, n, t, a, n, t, &dev,
                          &host),
        "getrf workspace query");
  Work w(dev, host, s);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.api.getrf(sv.handle, sv.params, n, n, t,
                       static_cast<char*>(a) + i * n * n * dt.size, n,
                       ipiv + i * n, t, w.device.ptr, dev, w.host.data(),
                       host, info + i),
          "getrf");
  }
}

void getrs(bool transpose, int64_t n, int64_t nrhs, int64_t batch, Dtype dt,
           const void* lu, const int64_t* ipiv, void* b, int* info,
           const Stream& s) {
  Solver sv = solver(s);
  cudaDataType t = data_type(dt);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.api.getrs(sv.handle, sv.params,
                       transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, nrhs, t,
                       static_cast<const char*>(lu) + i * n * n * dt.size, n,
                       ipiv + i * n, t,
                       static_cast<char*>(b) + i * n * nrhs * dt.size, n,
                       info + i),
          "getrs");
  }
}

void syevd(bool vectors, bool upper, int64_t n, int64_t batch, Dtype dt,
           void* a, void* w, int* info, const Stream& s) {
  Solver sv = solver(s);
  cudaDataType t = data_type(dt);
  cusolverEigMode_t job =
      vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  size_t dev = 0, host = 0;
  check(sv.api.syevd_size(sv.handle, sv.params, job, fill(upper), n, t, a, n,
                          t, w, t, &dev, &host),
        "syevd workspace query");
  Work work(dev, host, s);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.api.syevd(sv.handle, sv.params, job, fill(upper), n, t,
                       static_cast<char*>(a) + i * n * n * dt.size, n, t,
                       static_cast<char*>(w) + i * n * dt.size, t,
                       work.device.ptr, dev, work.host.data(), host,
                       info + i),
          "syevd");
  }
}

std::vector<int> read_info(const int* info, int64_t batch, const Stream& s) {
  std::vector<int> out(static_cast<size_t>(batch));
  cudaStream_t st = cuda_stream(s);
  KILN_CHECK_CUDA(cudaMemcpyAsync(out.data(), info, out.size() * sizeof(int),
                                  cudaMemcpyDeviceToHost, st));
  KILN_CHECK_CUDA(cudaStreamSynchronize(st));
  return out;
}

} // namespace kiln::cuda::cusolver
