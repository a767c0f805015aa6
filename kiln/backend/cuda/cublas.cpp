#include "kiln/backend/cuda/cublas.h"

#include <cublas_v2.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/backend/cuda/addresses.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/gemm.h"
#include "kiln/backend/cuda/toolkit_library.h"

namespace kiln::cuda::cublas {

namespace {

// The exported gemmBatchedEx (the header overloads the name with an inline
// wrapper taking a cudaDataType compute type).
using GemmBatchedEx = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
    const void*, const void* const[], cudaDataType, int, const void* const[],
    cudaDataType, int, const void*, void* const[], cudaDataType, int, int,
    cublasComputeType_t, cublasGemmAlgo_t);

using GemmGroupedBatchedEx = decltype(&cublasGemmGroupedBatchedEx);

// The entry points kiln uses, resolved from the loaded library (the _v2
// names are the exported ones); gemm_grouped is optional (cuBLAS 12.5 on).
struct Api {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasStrsm_v2) strsm = nullptr;
  decltype(&cublasDtrsm_v2) dtrsm = nullptr;
  decltype(&cublasSgetrfBatched) sgetrf_batched = nullptr;
  decltype(&cublasDgetrfBatched) dgetrf_batched = nullptr;
  GemmBatchedEx gemm_batched = nullptr;
  GemmGroupedBatchedEx gemm_grouped = nullptr;
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
                 KILN_RESOLVE(dtrsm, cublasDtrsm_v2) &&
                 KILN_RESOLVE(sgetrf_batched, cublasSgetrfBatched) &&
                 KILN_RESOLVE(dgetrf_batched, cublasDgetrfBatched) &&
                 KILN_RESOLVE(gemm_batched, cublasGemmBatchedEx) &&
                 (KILN_RESOLVE(gemm_grouped, cublasGemmGroupedBatchedEx) ||
                  true);
        });
    return lib ? &a : nullptr;
  }();
  return loaded;
}

#undef KILN_RESOLVE

void check(cublasStatus_t r, const char* what) {
  if (r == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("[cuBLAS] ") + what +
                           " failed (status " +
                           std::to_string(static_cast<int>(r)) + ")");
}

// One handle for the process (kiln uses one GPU), bound to the caller's
// stream per call while the lock is held; scalars are read from the host.
class Blas {
 public:
  explicit Blas(const Stream& s) {
    lib_ = api();
    if (!lib_) throw std::runtime_error("[linalg] cuBLAS is not available");
    static std::mutex mutex;
    static cublasHandle_t handle = nullptr;
    lock_ = std::unique_lock<std::mutex>(mutex);
    if (!handle) check(lib_->create(&handle), "handle creation");
    check(lib_->set_stream(handle, cuda_stream(s)), "stream binding");
    handle_ = handle;
  }
  const Api& lib() const { return *lib_; }
  cublasHandle_t handle() const { return handle_; }

 private:
  const Api* lib_ = nullptr;
  std::unique_lock<std::mutex> lock_;
  cublasHandle_t handle_ = nullptr;
};

} // namespace

bool available() { return api() != nullptr; }

void trsm(bool upper, int64_t n, int64_t nrhs, int64_t batch, Dtype dt,
          const void* a, void* b, const Stream& s) {
  Blas blas(s);
  cublasFillMode_t fill =
      upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  int ni = static_cast<int>(n), ri = static_cast<int>(nrhs);
  for (int64_t i = 0; i < batch; ++i) {
    if (dt == float64) {
      const double one = 1;
      auto* ai = static_cast<const double*>(a) + i * n * n;
      auto* bi = static_cast<double*>(b) + i * n * nrhs;
      check(blas.lib().dtrsm(blas.handle(), CUBLAS_SIDE_LEFT, fill,
                             CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, ni, ri, &one,
                             ai, ni, bi, ni),
            "trsm");
    } else {
      const float one = 1;
      auto* ai = static_cast<const float*>(a) + i * n * n;
      auto* bi = static_cast<float*>(b) + i * n * nrhs;
      check(blas.lib().strsm(blas.handle(), CUBLAS_SIDE_LEFT, fill,
                             CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, ni, ri, &one,
                             ai, ni, bi, ni),
            "trsm");
    }
  }
}

void getrf_batched(int64_t n, int64_t batch, Dtype dt, void* a, int* ipiv,
                   int* info, const Stream& s) {
  Blas blas(s);
  // The routine takes a device array of the matrices' addresses.
  Scratch list(static_cast<size_t>(batch) * sizeof(void*), s);
  strided_addresses(list, a, batch, static_cast<size_t>(n * n) * dt.size, s);
  int ni = static_cast<int>(n), bi = static_cast<int>(batch);
  check(dt == float64
            ? blas.lib().dgetrf_batched(blas.handle(), ni,
                                        static_cast<double**>(list.ptr), ni,
                                        ipiv, info, bi)
            : blas.lib().sgetrf_batched(blas.handle(), ni,
                                        static_cast<float**>(list.ptr), ni,
                                        ipiv, info, bi),
        "getrfBatched");
}

bool gemm_batched_supports(Dtype dt) {
  return dt == float16 || dt == bfloat16 || dt == float32 || dt == float64;
}

namespace {

std::atomic<int64_t>& grouped_calls() {
  static std::atomic<int64_t> n{0};
  return n;
}

// The data and compute types of a GEMM in dt (gemm_batched's comment).
cudaDataType_t data_type(Dtype dt) {
  return dt == float16    ? CUDA_R_16F
         : dt == bfloat16 ? CUDA_R_16BF
         : dt == float64  ? CUDA_R_64F
                          : CUDA_R_32F;
}

cublasComputeType_t compute_type(Dtype dt) {
  return dt == float64                    ? CUBLAS_COMPUTE_64F
         : dt == float32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
}

} // namespace

void gemm_batched(int64_t m, int64_t n, int64_t k, Dtype dt,
                  const void* const* a, bool a_trans, int64_t lda,
                  const void* const* b, bool b_trans, int64_t ldb,
                  void* const* c, int64_t batch, const Stream& s) {
  Blas blas(s);
  // Row-major C = A B is column-major C^T = B^T A^T: b's matrices come
  // first, each row-major operand being its transpose column-major.
  cudaDataType_t type = data_type(dt);
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const void* alpha = dt == float64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta =
      dt == float64 ? static_cast<const void*>(&zero64) : &zero32;
  check(blas.lib().gemm_batched(
            blas.handle(), b_trans ? CUBLAS_OP_T : CUBLAS_OP_N,
            a_trans ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
            static_cast<int>(m), static_cast<int>(k), alpha, b, type,
            static_cast<int>(ldb), a, type, static_cast<int>(lda), beta, c,
            type, static_cast<int>(n), static_cast<int>(batch),
            compute_type(dt), CUBLAS_GEMM_DEFAULT),
        "gemmBatchedEx");
}

int64_t grouped_gemm_calls() { return grouped_calls().load(); }

bool gemm_grouped(const std::vector<int>& ms, const std::vector<int>& ks,
                  int64_t n, Dtype dt, const void* const* a, bool a_trans,
                  int64_t lda, const void* const* b, bool b_trans,
                  int64_t ldb, void* const* c, const Stream& s) {
  Blas blas(s);
  if (!blas.lib().gemm_grouped || ms.empty()) return false;
  // As gemm_batched: column-major C_g^T (n x m_g) = B_g^T A_g^T, each group
  // one problem.
  int count = static_cast<int>(ms.size());
  std::vector<cublasOperation_t> ta(count, b_trans ? CUBLAS_OP_T : CUBLAS_OP_N);
  std::vector<cublasOperation_t> tb(count, a_trans ? CUBLAS_OP_T : CUBLAS_OP_N);
  std::vector<int> ns(count, static_cast<int>(n)), ones(count, 1);
  std::vector<int> ldas(count, static_cast<int>(ldb)),
      ldbs(count, static_cast<int>(lda));
  std::vector<double> one64(count, 1.0), zero64(count, 0.0);
  std::vector<float> one32(count, 1.0f), zero32(count, 0.0f);
  const void* alpha = dt == float64 ? static_cast<const void*>(one64.data())
                                    : one32.data();
  const void* beta = dt == float64 ? static_cast<const void*>(zero64.data())
                                   : zero32.data();
  cudaDataType_t type = data_type(dt);
  cublasStatus_t r = blas.lib().gemm_grouped(
      blas.handle(), ta.data(), tb.data(), ns.data(), ms.data(), ks.data(),
      alpha, b, type, ldas.data(), a, type, ldbs.data(), beta, c, type,
      ns.data(), count, ones.data(), compute_type(dt));
  // A refusal (types, sizes or this GPU) leaves the caller's other route.
  if (r != CUBLAS_STATUS_SUCCESS) return false;
  grouped_calls().fetch_add(1, std::memory_order_relaxed);
  return true;
}

} // namespace kiln::cuda::cublas
