#include "kiln/backend/cuda/gemm.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "kiln/backend/cuda/allocator.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/env.h"

namespace kiln::cuda {

namespace {

std::atomic<bool>& tf32_flag() {
  static std::atomic<bool> f{env::flag("KILN_ALLOW_TF32", false)};
  return f;
}

cublasLtHandle_t handle() {
  static cublasLtHandle_t h = [] {
    set_current_device();
    cublasLtHandle_t h;
    KILN_CHECK_CUBLAS(cublasLtCreate(&h));
    return h;
  }();
  return h;
}

cudaDataType_t data_type(Dtype dt) {
  switch (dt.val) {
    case Dtype::Val::float16: return CUDA_R_16F;
    case Dtype::Val::bfloat16: return CUDA_R_16BF;
    case Dtype::Val::float64: return CUDA_R_64F;
    case Dtype::Val::complex64: return CUDA_C_32F;
    default: return CUDA_R_32F;
  }
}

// Largest power of two (up to 256) dividing the address.
int alignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && v % (a * 2) == 0) a *= 2;
  return a;
}

using PlanKey = std::tuple<int, bool, bool, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, bool, bool, int, int, int, int>;

int64_t out_ld(const GemmArgs& g) { return g.out_ld > 0 ? g.out_ld : g.n; }
int64_t out_batch_stride(const GemmArgs& g) {
  return g.out_batch_stride > 0 ? g.out_batch_stride : g.m * g.n;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  bool ok = false; // false: cuBLASLt offered no algorithm
};

void set_batch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  int32_t count = static_cast<int32_t>(batch);
  KILN_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(
      l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  KILN_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(
      l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
      sizeof(stride)));
}

Plan make_plan(const GemmArgs& g, bool tf32) {
  Plan p;
  cudaDataType_t dt = data_type(g.dtype);
  bool f64 = g.dtype == float64;
  cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F
          : (g.dtype == float32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                        : CUBLAS_COMPUTE_32F);
  // complex64 scales by complex alpha and beta (their imaginary parts 0).
  cudaDataType_t scale = f64                        ? CUDA_R_64F
                         : g.dtype == complex64 ? CUDA_C_32F
                                                : CUDA_R_32F;
  KILN_CHECK_CUBLAS(cublasLtMatmulDescCreate(&p.desc, compute, scale));
  // The swap: cuBLASLt's A is our b, its B our a.
  cublasOperation_t ta = g.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = g.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  KILN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(
      p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  KILN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(
      p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (g.bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    KILN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    // The heuristic reads the bias alignment from the pointer set here.
    KILN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  // Column-major shapes as stored: b is N x K (or K x N when transposed),
  // a is K x M (or M x K), D is N x M.
  uint64_t a_rows = g.b.transposed ? g.k : g.n;
  uint64_t a_cols = g.b.transposed ? g.n : g.k;
  uint64_t b_rows = g.a.transposed ? g.m : g.k;
  uint64_t b_cols = g.a.transposed ? g.k : g.m;
  KILN_CHECK_CUBLAS(
      cublasLtMatrixLayoutCreate(&p.a, dt, a_rows, a_cols, g.b.ld));
  KILN_CHECK_CUBLAS(
      cublasLtMatrixLayoutCreate(&p.b, dt, b_rows, b_cols, g.a.ld));
  KILN_CHECK_CUBLAS(
      cublasLtMatrixLayoutCreate(&p.d, dt, g.n, g.m, out_ld(g)));
  if (g.batch > 1) {
    set_batch(p.a, g.batch, g.b.batch_stride);
    set_batch(p.b, g.batch, g.a.batch_stride);
    set_batch(p.d, g.batch, out_batch_stride(g));
  }
  cublasLtMatmulPreference_t pref;
  KILN_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t max_ws = device_info().major >= 9 ? (32u << 20) : (4u << 20);
  KILN_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
      sizeof(max_ws)));
  // Declare the true alignments: the default assumes 256 bytes, and a
  // kernel picked under that assumption refuses sliced operands.
  uint32_t al[4] = {uint32_t(alignment(g.b.ptr)), uint32_t(alignment(g.a.ptr)),
                    uint32_t(alignment(g.out)), uint32_t(alignment(g.out))};
  cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    KILN_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, which[i], &al[i], sizeof(al[i])));
  }
  cublasLtMatmulHeuristicResult_t result;
  int returned = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      handle(), p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && returned > 0) {
    p.algo = result.algo;
    p.workspace = (result.workspaceSize + 255) / 256 * 256;
    p.ok = true;
  } else if (st != CUBLAS_STATUS_SUCCESS &&
             st != CUBLAS_STATUS_NOT_SUPPORTED) {
    KILN_CHECK_CUBLAS(st);
  }
  return p;
}

std::mutex& plan_mutex() {
  static std::mutex m;
  return m;
}

std::map<PlanKey, Plan>& plans() {
  static auto* p = new std::map<PlanKey, Plan>; // never destroyed
  return *p;
}

} // namespace

void set_allow_tf32(bool allow) { tf32_flag() = allow; }
bool allow_tf32() { return tf32_flag(); }

bool gemm_supports(Dtype dt) {
  return dt == float32 || dt == float16 || dt == bfloat16 || dt == float64 ||
         dt == complex64;
}

bool gemm(const GemmArgs& g) {
  bool tf32 = allow_tf32();
  PlanKey key{static_cast<int>(g.dtype.val), g.a.transposed, g.b.transposed,
              g.m, g.n, g.k, g.a.ld, g.b.ld, g.batch,
              g.batch > 1 ? g.a.batch_stride : 0,
              g.batch > 1 ? g.b.batch_stride : 0, out_ld(g),
              g.batch > 1 ? out_batch_stride(g) : 0, g.bias != nullptr, tf32,
              alignment(g.a.ptr), alignment(g.b.ptr), alignment(g.out),
              g.bias ? alignment(g.bias) : 0};
  Plan* plan;
  {
    std::lock_guard<std::mutex> lock(plan_mutex());
    auto it = plans().find(key);
    if (it == plans().end()) {
      it = plans().emplace(key, make_plan(g, tf32)).first;
    }
    plan = &it->second;
  }
  if (!plan->ok) return false;
  if (g.bias) {
    KILN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
        sizeof(g.bias)));
  }
  cudaStream_t stream = cuda_stream(g.stream);
  // The workspace goes back to the cache at once: the allocator hands it to
  // later work on this stream only, or behind an event.
  void* ws = plan->workspace ? device_malloc(plan->workspace, g.stream)
                             : nullptr;
  // alpha and beta in the plan's scale type: double, float, or a complex
  // float's two parts.
  double alpha64 = g.alpha, beta64 = g.beta;
  float alpha32[2] = {g.alpha, 0.0f}, beta32[2] = {g.beta, 0.0f};
  bool f64 = g.dtype == float64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : beta32;
  cublasStatus_t st = cublasLtMatmul(
      handle(), plan->desc, alpha, g.b.ptr, plan->a, g.a.ptr, plan->b, beta,
      g.out, plan->d, g.out, plan->d, &plan->algo, ws, plan->workspace,
      stream);
  device_free(ws, uint64_t(1) << (g.stream % 64));
  KILN_CHECK_CUBLAS(st);
  return true;
}

} // namespace kiln::cuda
