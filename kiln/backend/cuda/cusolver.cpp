#include "kiln/backend/cuda/cusolver.h"

#include <cusolverDn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kiln/backend/cuda/addresses.h"
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
  decltype(&cusolverDnSpotrfBatched) spotrf_batched = nullptr;
  decltype(&cusolverDnDpotrfBatched) dpotrf_batched = nullptr;
  decltype(&cusolverDnXtrtri_bufferSize) trtri_size = nullptr;
  decltype(&cusolverDnXtrtri) trtri = nullptr;
  decltype(&cusolverDnXgetrf_bufferSize) getrf_size = nullptr;
  decltype(&cusolverDnXgetrf) getrf = nullptr;
  decltype(&cusolverDnXgetrs) getrs = nullptr;
  decltype(&cusolverDnXsyevd_bufferSize) syevd_size = nullptr;
  decltype(&cusolverDnXsyevd) syevd = nullptr;
  decltype(&cusolverDnCreateSyevjInfo) create_syevj_info = nullptr;
  decltype(&cusolverDnSsyevjBatched_bufferSize) ssyevj_size = nullptr;
  decltype(&cusolverDnSsyevjBatched) ssyevj = nullptr;
  decltype(&cusolverDnDsyevjBatched_bufferSize) dsyevj_size = nullptr;
  decltype(&cusolverDnDsyevjBatched) dsyevj = nullptr;
  decltype(&cusolverDnXgeqrf_bufferSize) geqrf_size = nullptr;
  decltype(&cusolverDnXgeqrf) geqrf = nullptr;
  // orgqr has no generic form: one per type.
  decltype(&cusolverDnSorgqr_bufferSize) sorgqr_size = nullptr;
  decltype(&cusolverDnSorgqr) sorgqr = nullptr;
  decltype(&cusolverDnDorgqr_bufferSize) dorgqr_size = nullptr;
  decltype(&cusolverDnDorgqr) dorgqr = nullptr;
  decltype(&cusolverDnXgesvd_bufferSize) gesvd_size = nullptr;
  decltype(&cusolverDnXgesvd) gesvd = nullptr;
  // gesvdj has no generic form: one per type.
  decltype(&cusolverDnCreateGesvdjInfo) create_gesvdj_info = nullptr;
  decltype(&cusolverDnXgesvdjSetMaxSweeps) gesvdj_set_max_sweeps = nullptr;
  decltype(&cusolverDnSgesvdj_bufferSize) sgesvdj_size = nullptr;
  decltype(&cusolverDnSgesvdj) sgesvdj = nullptr;
  decltype(&cusolverDnDgesvdj_bufferSize) dgesvdj_size = nullptr;
  decltype(&cusolverDnDgesvdj) dgesvdj = nullptr;
  decltype(&cusolverDnXgesvdjSetSortEig) gesvdj_set_sort = nullptr;
  decltype(&cusolverDnSgesvdjBatched_bufferSize) sgesvdj_batched_size =
      nullptr;
  decltype(&cusolverDnSgesvdjBatched) sgesvdj_batched = nullptr;
  decltype(&cusolverDnDgesvdjBatched_bufferSize) dgesvdj_batched_size =
      nullptr;
  decltype(&cusolverDnDgesvdjBatched) dgesvdj_batched = nullptr;
  // CUDA 12.6 and later only.
  decltype(&cusolverDnXgeev_bufferSize) geev_size = nullptr;
  decltype(&cusolverDnXgeev) geev = nullptr;
};

#define KILN_RESOLVE(field, symbol) resolve(lib, #symbol, a.field)

const Api* api() {
  static const Api* loaded = []() -> const Api* {
    static Api a;
    void* lib = open_toolkit_library(
        "KILN_CUSOLVER_LIBRARY", {"libcusolver.so.12", "libcusolver.so.11"},
        [](void* lib) {
          bool required =
              KILN_RESOLVE(create, cusolverDnCreate) &&
              KILN_RESOLVE(set_stream, cusolverDnSetStream) &&
              KILN_RESOLVE(create_params, cusolverDnCreateParams) &&
              KILN_RESOLVE(potrf_size, cusolverDnXpotrf_bufferSize) &&
              KILN_RESOLVE(potrf, cusolverDnXpotrf) &&
              KILN_RESOLVE(spotrf_batched, cusolverDnSpotrfBatched) &&
              KILN_RESOLVE(dpotrf_batched, cusolverDnDpotrfBatched) &&
              KILN_RESOLVE(trtri_size, cusolverDnXtrtri_bufferSize) &&
              KILN_RESOLVE(trtri, cusolverDnXtrtri) &&
              KILN_RESOLVE(getrf_size, cusolverDnXgetrf_bufferSize) &&
              KILN_RESOLVE(getrf, cusolverDnXgetrf) &&
              KILN_RESOLVE(getrs, cusolverDnXgetrs) &&
              KILN_RESOLVE(syevd_size, cusolverDnXsyevd_bufferSize) &&
              KILN_RESOLVE(syevd, cusolverDnXsyevd) &&
              KILN_RESOLVE(create_syevj_info, cusolverDnCreateSyevjInfo) &&
              KILN_RESOLVE(ssyevj_size, cusolverDnSsyevjBatched_bufferSize) &&
              KILN_RESOLVE(ssyevj, cusolverDnSsyevjBatched) &&
              KILN_RESOLVE(dsyevj_size, cusolverDnDsyevjBatched_bufferSize) &&
              KILN_RESOLVE(dsyevj, cusolverDnDsyevjBatched) &&
              KILN_RESOLVE(geqrf_size, cusolverDnXgeqrf_bufferSize) &&
              KILN_RESOLVE(geqrf, cusolverDnXgeqrf) &&
              KILN_RESOLVE(sorgqr_size, cusolverDnSorgqr_bufferSize) &&
              KILN_RESOLVE(sorgqr, cusolverDnSorgqr) &&
              KILN_RESOLVE(dorgqr_size, cusolverDnDorgqr_bufferSize) &&
              KILN_RESOLVE(dorgqr, cusolverDnDorgqr) &&
              KILN_RESOLVE(gesvd_size, cusolverDnXgesvd_bufferSize) &&
              KILN_RESOLVE(gesvd, cusolverDnXgesvd) &&
              KILN_RESOLVE(create_gesvdj_info, cusolverDnCreateGesvdjInfo) &&
              KILN_RESOLVE(gesvdj_set_max_sweeps,
                           cusolverDnXgesvdjSetMaxSweeps) &&
              KILN_RESOLVE(sgesvdj_size, cusolverDnSgesvdj_bufferSize) &&
              KILN_RESOLVE(sgesvdj, cusolverDnSgesvdj) &&
              KILN_RESOLVE(dgesvdj_size, cusolverDnDgesvdj_bufferSize) &&
              KILN_RESOLVE(dgesvdj, cusolverDnDgesvdj) &&
              KILN_RESOLVE(gesvdj_set_sort, cusolverDnXgesvdjSetSortEig) &&
              KILN_RESOLVE(sgesvdj_batched_size,
                           cusolverDnSgesvdjBatched_bufferSize) &&
              KILN_RESOLVE(sgesvdj_batched, cusolverDnSgesvdjBatched) &&
              KILN_RESOLVE(dgesvdj_batched_size,
                           cusolverDnDgesvdjBatched_bufferSize) &&
              KILN_RESOLVE(dgesvdj_batched, cusolverDnDgesvdjBatched);
          if (!KILN_RESOLVE(geev_size, cusolverDnXgeev_bufferSize) ||
              !KILN_RESOLVE(geev, cusolverDnXgeev)) {
            a.geev = nullptr; // optional: Eig then runs on the CPU
          }
          return required;
        });
    return lib ? &a : nullptr;
  }();
  return loaded;
}

#undef KILN_RESOLVE

void check(cusolverStatus_t r, const char* what) {
  if (r == CUSOLVER_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("[linalg] cuSOLVER ") + what +
                           " failed (status " +
                           std::to_string(static_cast<int>(r)) + ")");
}

// One handle and one params object for the process (kiln uses one GPU),
// bound to the caller's stream per call under the lock; work areas sized
// by the routine's query, device memory from kiln's allocator on the
// stream, host memory of its own.
class Solver {
 public:
  explicit Solver(const Stream& s) : stream_(s) {
    const Api* a = api();
    if (!a) throw std::runtime_error("[linalg] cuSOLVER is not available");
    api_ = a;
    static std::mutex mutex;
    static cusolverDnHandle_t handle = nullptr;
    static cusolverDnParams_t params = nullptr;
    lock_ = std::unique_lock<std::mutex>(mutex);
    if (!handle) {
      check(a->create(&handle), "handle creation");
      check(a->create_params(&params), "params creation");
    }
    check(a->set_stream(handle, cuda_stream(s)), "stream binding");
    handle_ = handle;
    params_ = params;
  }
  const Api& lib() const { return *api_; }
  cusolverDnHandle_t handle() const { return handle_; }
  cusolverDnParams_t params() const { return params_; }
  /** Work areas of these sizes (a query's answer). */
  void reserve(size_t device_bytes, size_t host_bytes) {
    device_.emplace(std::max<size_t>(device_bytes, 1), stream_);
    host_.resize(host_bytes);
  }
  void* device_work() { return device_->ptr; }
  void* host_work() { return host_.data(); }

 private:
  Stream stream_;
  const Api* api_ = nullptr;
  std::unique_lock<std::mutex> lock_;
  cusolverDnHandle_t handle_ = nullptr;
  cusolverDnParams_t params_ = nullptr;
  std::optional<Scratch> device_;
  std::vector<char> host_;
};

cudaDataType data_type(Dtype dt) {
  return dt == float64 ? CUDA_R_64F : CUDA_R_32F;
}

cusolverEigMode_t eig_mode(bool vectors) {
  return vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
}

cublasFillMode_t fill(bool upper) {
  return upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
}

// Element i * stride of the batch at p.
template <typename P>
P* at(P* p, int64_t i, int64_t stride, Dtype dt) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return static_cast<P*>(reinterpret_cast<Byte*>(p) + i * stride * dt.size);
}

} // namespace

bool available() { return api() != nullptr; }

bool supports(Dtype dt) {
  return (dt == float32 || dt == float64) && available();
}

// Up to this order a batch of Cholesky factorizations runs as one
// potrfBatched call (its kernels take every matrix at once) rather than a
// blocked potrf per matrix, whose launches dominate small matrices.
constexpr int64_t batched_potrf_max_n = 128;

void potrf(bool upper, int64_t n, int64_t batch, Dtype dt, void* a, int* info,
           const Stream& s) {
  Solver sv(s);
  if (batch > 1 && n <= batched_potrf_max_n && batch <= INT32_MAX) {
    Scratch list(static_cast<size_t>(batch) * sizeof(void*), s);
    strided_addresses(list, a, batch, static_cast<size_t>(n * n) * dt.size, s);
    int ni = static_cast<int>(n), bi = static_cast<int>(batch);
    check(dt == float64
              ? sv.lib().dpotrf_batched(sv.handle(), fill(upper), ni,
                                        static_cast<double**>(list.ptr), ni,
                                        info, bi)
              : sv.lib().spotrf_batched(sv.handle(), fill(upper), ni,
                                        static_cast<float**>(list.ptr), ni,
                                        info, bi),
          "potrfBatched");
    return;
  }
  cudaDataType t = data_type(dt);
  size_t dev = 0, host = 0;
  check(sv.lib().potrf_size(sv.handle(), sv.params(), fill(upper), n, t, a, n,
                            t, &dev, &host),
        "potrf workspace query");
  sv.reserve(dev, host);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().potrf(sv.handle(), sv.params(), fill(upper), n, t,
                         at(a, i, n * n, dt), n, t, sv.device_work(), dev,
                         sv.host_work(), host, info + i),
          "potrf");
  }
}

void trtri(bool upper, int64_t n, int64_t batch, Dtype dt, void* a, int* info,
           const Stream& s) {
  Solver sv(s);
  cudaDataType t = data_type(dt);
  size_t dev = 0, host = 0;
  check(sv.lib().trtri_size(sv.handle(), fill(upper), CUBLAS_DIAG_NON_UNIT, n,
                            t, a, n, &dev, &host),
        "trtri workspace query");
  sv.reserve(dev, host);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().trtri(sv.handle(), fill(upper), CUBLAS_DIAG_NON_UNIT, n, t,
                         at(a, i, n * n, dt), n, sv.device_work(), dev,
                         sv.host_work(), host, info + i),
          "trtri");
  }
}

void getrf(int64_t m, int64_t n, int64_t batch, Dtype dt, void* a,
           int64_t* ipiv, int* info, const Stream& s) {
  Solver sv(s);
  cudaDataType t = data_type(dt);
  size_t dev = 0, host = 0;
  check(sv.lib().getrf_size(sv.handle(), sv.params(), m, n, t, a, m, t, &dev,
                            &host),
        "getrf workspace query");
  sv.reserve(dev, host);
  int64_t k = std::min(m, n);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().getrf(sv.handle(), sv.params(), m, n, t,
                         at(a, i, m * n, dt), m, ipiv + i * k, t,
                         sv.device_work(), dev, sv.host_work(), host,
                         info + i),
          "getrf");
  }
}

void getrs(bool transpose, int64_t n, int64_t nrhs, int64_t batch, Dtype dt,
           const void* lu, const int64_t* ipiv, void* b, int* info,
           const Stream& s) {
  Solver sv(s);
  cudaDataType t = data_type(dt);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().getrs(sv.handle(), sv.params(),
                         transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, nrhs, t,
                         at(lu, i, n * n, dt), n, ipiv + i * n, t,
                         at(b, i, n * nrhs, dt), n, info + i),
          "getrs");
  }
}

void syevd(bool vectors, bool upper, int64_t n, int64_t batch, Dtype dt,
           void* a, void* w, int* info, const Stream& s) {
  Solver sv(s);
  cudaDataType t = data_type(dt);
  cusolverEigMode_t job = eig_mode(vectors);
  size_t dev = 0, host = 0;
  check(sv.lib().syevd_size(sv.handle(), sv.params(), job, fill(upper), n, t,
                            a, n, t, w, t, &dev, &host),
        "syevd workspace query");
  sv.reserve(dev, host);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().syevd(sv.handle(), sv.params(), job, fill(upper), n, t,
                         at(a, i, n * n, dt), n, t, at(w, i, n, dt), t,
                         sv.device_work(), dev, sv.host_work(), host,
                         info + i),
          "syevd");
  }
}

void syevj_batched(bool vectors, bool upper, int64_t n, int64_t batch,
                   Dtype dt, void* a, void* w, int* info, const Stream& s) {
  Solver sv(s);
  // Default Jacobi settings (machine precision, eigenvalues sorted), one
  // object for the process, used under the solver's lock.
  static syevjInfo_t params = nullptr;
  if (!params) check(sv.lib().create_syevj_info(&params), "syevj setup");
  cusolverEigMode_t job = eig_mode(vectors);
  int ni = static_cast<int>(n), bi = static_cast<int>(batch), lwork = 0;
  bool f64 = dt == float64;
  check(f64 ? sv.lib().dsyevj_size(sv.handle(), job, fill(upper), ni,
                                   static_cast<const double*>(a), ni,
                                   static_cast<const double*>(w), &lwork,
                                   params, bi)
            : sv.lib().ssyevj_size(sv.handle(), job, fill(upper), ni,
                                   static_cast<const float*>(a), ni,
                                   static_cast<const float*>(w), &lwork,
                                   params, bi),
        "syevjBatched workspace query");
  sv.reserve(static_cast<size_t>(lwork) * dt.size, 0);
  check(f64 ? sv.lib().dsyevj(sv.handle(), job, fill(upper), ni,
                              static_cast<double*>(a), ni,
                              static_cast<double*>(w),
                              static_cast<double*>(sv.device_work()), lwork,
                              info, params, bi)
            : sv.lib().ssyevj(sv.handle(), job, fill(upper), ni,
                              static_cast<float*>(a), ni,
                              static_cast<float*>(w),
                              static_cast<float*>(sv.device_work()), lwork,
                              info, params, bi),
        "syevjBatched");
}

void geqrf(int64_t m, int64_t n, int64_t batch, Dtype dt, void* a, void* tau,
           int* info, const Stream& s) {
  Solver sv(s);
  cudaDataType t = data_type(dt);
  size_t dev = 0, host = 0;
  check(sv.lib().geqrf_size(sv.handle(), sv.params(), m, n, t, a, m, t, tau,
                            t, &dev, &host),
        "geqrf workspace query");
  sv.reserve(dev, host);
  int64_t k = std::min(m, n);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().geqrf(sv.handle(), sv.params(), m, n, t,
                         at(a, i, m * n, dt), m, t, at(tau, i, k, dt), t,
                         sv.device_work(), dev, sv.host_work(), host,
                         info + i),
          "geqrf");
  }
}

void orgqr(int64_t m, int64_t n, int64_t k, int64_t stride, int64_t batch,
           Dtype dt, void* a, const void* tau, int* info, const Stream& s) {
  Solver sv(s);
  int mi = static_cast<int>(m), ni = static_cast<int>(n),
      ki = static_cast<int>(k), lwork = 0;
  bool f64 = dt == float64;
  check(f64 ? sv.lib().dorgqr_size(sv.handle(), mi, ni, ki,
                                   static_cast<const double*>(a), mi,
                                   static_cast<const double*>(tau), &lwork)
            : sv.lib().sorgqr_size(sv.handle(), mi, ni, ki,
                                   static_cast<const float*>(a), mi,
                                   static_cast<const float*>(tau), &lwork),
        "orgqr workspace query");
  sv.reserve(static_cast<size_t>(lwork) * dt.size, 0);
  for (int64_t i = 0; i < batch; ++i) {
    void* ai = at(a, i, stride, dt);
    const void* ti = at(tau, i, k, dt);
    check(f64 ? sv.lib().dorgqr(sv.handle(), mi, ni, ki,
                                static_cast<double*>(ai), mi,
                                static_cast<const double*>(ti),
                                static_cast<double*>(sv.device_work()), lwork,
                                info + i)
              : sv.lib().sorgqr(sv.handle(), mi, ni, ki,
                                static_cast<float*>(ai), mi,
                                static_cast<const float*>(ti),
                                static_cast<float*>(sv.device_work()), lwork,
                                info + i),
          "orgqr");
  }
}

void gesvd(bool vectors, int64_t m, int64_t n, int64_t batch, Dtype dt,
           void* a, void* sv_out, void* u, void* vt, int* info,
           const Stream& s) {
  Solver sv(s);
  cudaDataType t = data_type(dt);
  signed char job = vectors ? 'A' : 'N';
  size_t dev = 0, host = 0;
  check(sv.lib().gesvd_size(sv.handle(), sv.params(), job, job, m, n, t, a, m,
                            t, sv_out, t, u, m, t, vt, n, t, &dev, &host),
        "gesvd workspace query");
  sv.reserve(dev, host);
  int64_t k = std::min(m, n);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().gesvd(sv.handle(), sv.params(), job, job, m, n, t,
                         at(a, i, m * n, dt), m, t, at(sv_out, i, k, dt), t,
                         vectors ? at(u, i, m * m, dt) : nullptr, m, t,
                         vectors ? at(vt, i, n * n, dt) : nullptr, n, t,
                         sv.device_work(), dev, sv.host_work(), host,
                         info + i),
          "gesvd");
  }
}

namespace {

// gesvdj on the one matrix at a (U and V full, the values at sv), or, with
// `batched`, gesvdjBatched over `count` matrices stored one after another
// (and their U, V and values likewise).
template <typename T>
void run_gesvdj(const Api& lib, cusolverDnHandle_t h, gesvdjInfo_t params,
                bool batched, cusolverEigMode_t job, int m, int n, int count,
                T* a, T* sv, T* u, T* v, T* work, int lwork, int* info) {
  constexpr bool f64 = std::is_same_v<T, double>;
  cusolverStatus_t r;
  if (batched) {
    if constexpr (f64) {
      r = lib.dgesvdj_batched(h, job, m, n, a, m, sv, u, m, v, n, work, lwork,
                              info, params, count);
    } else {
      r = lib.sgesvdj_batched(h, job, m, n, a, m, sv, u, m, v, n, work, lwork,
                              info, params, count);
    }
  } else if constexpr (f64) {
    r = lib.dgesvdj(h, job, 0, m, n, a, m, sv, u, m, v, n, work, lwork, info,
                    params);
  } else {
    r = lib.sgesvdj(h, job, 0, m, n, a, m, sv, u, m, v, n, work, lwork, info,
                    params);
  }
  check(r, batched ? "gesvdjBatched" : "gesvdj");
}

template <typename T>
int gesvdj_lwork(const Api& lib, cusolverDnHandle_t h, gesvdjInfo_t params,
                 bool batched, cusolverEigMode_t job, int m, int n, int count,
                 const T* a, const T* sv, const T* u, const T* v) {
  constexpr bool f64 = std::is_same_v<T, double>;
  int lwork = 0;
  cusolverStatus_t r;
  if (batched) {
    if constexpr (f64) {
      r = lib.dgesvdj_batched_size(h, job, m, n, a, m, sv, u, m, v, n, &lwork,
                                   params, count);
    } else {
      r = lib.sgesvdj_batched_size(h, job, m, n, a, m, sv, u, m, v, n, &lwork,
                                   params, count);
    }
  } else if constexpr (f64) {
    r = lib.dgesvdj_size(h, job, 0, m, n, a, m, sv, u, m, v, n, &lwork,
                         params);
  } else {
    r = lib.sgesvdj_size(h, job, 0, m, n, a, m, sv, u, m, v, n, &lwork,
                         params);
  }
  check(r, "gesvdj workspace query");
  return lwork;
}

template <typename T>
void gesvdj_typed(Solver& sv, gesvdjInfo_t params, bool vectors, int64_t m,
                  int64_t n, int64_t batch, T* a, T* s_out, T* u, T* v,
                  int* info, const Stream& s) {
  cusolverEigMode_t job = eig_mode(vectors);
  int mi = static_cast<int>(m), ni = static_cast<int>(n);
  // A small matrix takes the batched routine even alone: its U and V (their
  // signs) then do not depend on the batch it comes in (vmap against a
  // loop).
  bool batched = m <= gesvdj_batched_max && n <= gesvdj_batched_max;
  int64_t k = std::min(m, n);
  // Without vectors gesvdj still writes U and V (measured: over a, their
  // stand-in, it wrote past the buffer): scratch takes them, one pair
  // reused down the batch or, for the batched routine, one per matrix.
  int64_t copies = batched ? batch : 1;
  std::optional<Scratch> u_scratch, v_scratch;
  if (!vectors) {
    u_scratch.emplace(static_cast<size_t>(copies * m * m) * sizeof(T), s);
    v_scratch.emplace(static_cast<size_t>(copies * n * n) * sizeof(T), s);
    u = static_cast<T*>(u_scratch->ptr);
    v = static_cast<T*>(v_scratch->ptr);
  }
  int count = batched ? static_cast<int>(batch) : 1;
  int lwork = gesvdj_lwork<T>(sv.lib(), sv.handle(), params, batched, job, mi,
                              ni, count, a, s_out, u, v);
  sv.reserve(static_cast<size_t>(lwork) * sizeof(T), 0);
  T* work = static_cast<T*>(sv.device_work());
  if (batched) {
    run_gesvdj<T>(sv.lib(), sv.handle(), params, true, job, mi, ni, count, a,
                  s_out, u, v, work, lwork, info);
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    run_gesvdj<T>(sv.lib(), sv.handle(), params, false, job, mi, ni, 1,
                  a + i * m * n, s_out + i * k, vectors ? u + i * m * m : u,
                  vectors ? v + i * n * n : v, work, lwork, info + i);
  }
}

// gesvdj's sweep limit, read at each call.
std::atomic<int> gesvdj_sweeps{100};

} // namespace

void set_gesvdj_max_sweeps(int sweeps) { gesvdj_sweeps = sweeps; }

void gesvdj(bool vectors, int64_t m, int64_t n, int64_t batch, Dtype dt,
            void* a, void* sv_out, void* u, void* v, int* info,
            const Stream& s) {
  Solver sv(s);
  // Machine precision, values sorted (descending), the sweeps as set; one
  // object for the process, used under the solver's lock.
  static gesvdjInfo_t params = nullptr;
  if (!params) {
    check(sv.lib().create_gesvdj_info(&params), "gesvdj setup");
    check(sv.lib().gesvdj_set_sort(params, 1), "gesvdj setup");
  }
  check(sv.lib().gesvdj_set_max_sweeps(params, gesvdj_sweeps.load()),
        "gesvdj setup");
  if (dt == float64) {
    gesvdj_typed<double>(sv, params, vectors, m, n, batch,
                         static_cast<double*>(a), static_cast<double*>(sv_out),
                         static_cast<double*>(u), static_cast<double*>(v),
                         info, s);
  } else {
    gesvdj_typed<float>(sv, params, vectors, m, n, batch,
                        static_cast<float*>(a), static_cast<float*>(sv_out),
                        static_cast<float*>(u), static_cast<float*>(v), info,
                        s);
  }
}

bool has_geev() { return available() && api()->geev != nullptr; }

void geev(bool vectors, int64_t n, int64_t batch, void* a, void* w, void* vr,
          int* info, const Stream& s) {
  Solver sv(s);
  cusolverEigMode_t none = CUSOLVER_EIG_MODE_NOVECTOR;
  cusolverEigMode_t right = eig_mode(vectors);
  size_t dev = 0, host = 0;
  check(sv.lib().geev_size(sv.handle(), sv.params(), none, right, n,
                           CUDA_R_32F, a, n, CUDA_C_32F, w, CUDA_R_32F,
                           nullptr, 1, CUDA_R_32F, vr, n, CUDA_R_32F, &dev,
                           &host),
        "geev workspace query");
  sv.reserve(dev, host);
  for (int64_t i = 0; i < batch; ++i) {
    check(sv.lib().geev(sv.handle(), sv.params(), none, right, n, CUDA_R_32F,
                        at(a, i, n * n, float32), n, CUDA_C_32F,
                        at(w, i, n, complex64), CUDA_R_32F, nullptr, 1,
                        CUDA_R_32F,
                        vectors ? at(vr, i, n * n, float32) : nullptr, n,
                        CUDA_R_32F, sv.device_work(), dev, sv.host_work(),
                        host, info + i),
          "geev");
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
