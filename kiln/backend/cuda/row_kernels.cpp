#include "kiln/backend/cuda/row_kernels.h"

#include <algorithm>
#include <functional>

#include "kiln/backend/cuda/kernels.h"

namespace kiln::cuda {

namespace {

// Threads per block of the warp-per-row kernels (device/norms.cuh's
// norm_warp is built for blocks of norm_warp_block = this).
constexpr int warp_block_threads = 256;

bool is_half(Dtype dt) { return dt == float16 || dt == bfloat16; }

std::string include(const char* header) {
  return std::string("#include \"kiln/backend/cuda/device/") + header + "\"\n";
}

// "N" (elements per chunk), plus ", K" (chunks per lane) for the warp
// variant.
std::string width_args(Dtype dt, bool warp) {
  int n = row_vec_width(dt);
  std::string s = std::to_string(n);
  if (warp) s += ", " + std::to_string(row_lane_elements / n);
  return s;
}

// The variant asked for, with the other one compiled alongside.
JitKernel with_sibling(bool warp, const std::function<JitKernel(bool)>& make) {
  JitKernel k = make(warp);
  JitKernel other = make(!warp);
  k.siblings.emplace_back(other.name, other.expression);
  return k;
}

JitKernel softmax_one(Dtype dt, bool precise, bool warp) {
  std::string t = device_type(dt);
  std::string acc = precise ? "float" : t;
  std::string op = precise ? "SoftmaxPrecise" : "Softmax";
  std::string expr = std::string("kiln::cuda::softmax_") +
                     (warp ? "warp" : "block") + "<" + t + ", " + acc + ", " +
                     width_args(dt, warp) + ">";
  return {(warp ? "w" : "b") + op + dtype_name(dt),
          include("softmax.cuh"),
          expr,
          {}};
}

JitKernel logsumexp_one(Dtype dt, bool warp) {
  std::string expr = std::string("kiln::cuda::logsumexp_") +
                     (warp ? "warp" : "block") + "<" + device_type(dt) + ", " +
                     std::to_string(row_vec_width(dt)) + ">";
  return {(warp ? "wLogSumExp" : "bLogSumExp") + dtype_name(dt),
          include("softmax.cuh"),
          expr,
          {}};
}

JitKernel norm_one(const std::string& op, Dtype dt, bool warp) {
  std::string rms = op == "RMSNorm" ? "true" : "false";
  std::string expr = std::string("kiln::cuda::norm_") +
                     (warp ? "warp" : "block") + "<" + device_type(dt) + ", " +
                     width_args(dt, warp) + ", " + rms + ">";
  return {
      (warp ? "w" : "b") + op + dtype_name(dt), include("norms.cuh"), expr, {}};
}

JitKernel norm_vjp_one(const std::string& op, Dtype dt, bool warp) {
  std::string rms = op == "RMSNormVjp" ? "true" : "false";
  std::string expr = std::string("kiln::cuda::norm_vjp_") +
                     (warp ? "warp" : "block") + "<" + device_type(dt) + ", " +
                     width_args(dt, warp) + ", " + rms + ">";
  return {
      (warp ? "w" : "b") + op + dtype_name(dt), include("norms.cuh"), expr, {}};
}

} // namespace

JitKernel softmax_kernel(Dtype dt, bool precise, bool warp) {
  bool p = precise && is_half(dt);
  return with_sibling(warp, [&](bool w) { return softmax_one(dt, p, w); });
}

JitKernel logsumexp_kernel(Dtype dt, bool warp) {
  return with_sibling(warp, [&](bool w) { return logsumexp_one(dt, w); });
}

JitKernel norm_kernel(const std::string& op, Dtype dt, bool warp) {
  return with_sibling(warp, [&](bool w) { return norm_one(op, dt, w); });
}

JitKernel norm_vjp_dweight_kernel(Dtype dt) {
  return {"vNormVjpDweight" + dtype_name(dt),
          include("norms.cuh"),
          std::string("kiln::cuda::norm_vjp_dweight<") + device_type(dt) + ">",
          {}};
}

JitKernel norm_vjp_kernel(const std::string& op, Dtype dt, bool warp) {
  JitKernel k =
      with_sibling(warp, [&](bool w) { return norm_vjp_one(op, dt, w); });
  JitKernel dweight = norm_vjp_dweight_kernel(dt);
  k.siblings.emplace_back(dweight.name, dweight.expression);
  return k;
}

JitKernel rope_kernel(Dtype dt) {
  return {"vRoPE" + dtype_name(dt),
          include("rope.cuh"),
          std::string("kiln::cuda::rope<") + device_type(dt) + ">",
          {}};
}

int sdpa_width(int64_t head_dim) {
  int w = 1;
  while (w * 32 < head_dim) w *= 2;
  return w;
}

JitKernel sdpa_kernel(Dtype dt, int64_t head_dim) {
  auto one = [&](int w) {
    return JitKernel{"wSdpa" + std::to_string(w) + dtype_name(dt),
                     include("sdpa.cuh"),
                     std::string("kiln::cuda::sdpa_warp<") + device_type(dt) +
                         ", " + std::to_string(w) + ">",
                     {}};
  };
  int width = sdpa_width(head_dim);
  JitKernel k = one(width);
  for (int w = 1; w <= sdpa_max_width; w *= 2) {
    if (w == width) continue;
    JitKernel s = one(w);
    k.siblings.emplace_back(s.name, s.expression);
  }
  return k;
}

bool flash_sdpa_supports(Dtype dt, int64_t head_dim, int64_t v_head_dim) {
  return is_half(dt) && head_dim == v_head_dim &&
         (head_dim == 64 || head_dim == 128);
}

namespace {

// The kernel for mask_kind with the other two mask kinds as siblings.
JitKernel flash_family(const char* op, const char* header, const char* fn,
                       Dtype dt, int head_dim, int mask_kind) {
  auto one = [&](int m) {
    static const char* const mask_names[] = {"", "Bool", "Add"};
    std::string d = std::to_string(head_dim);
    return JitKernel{op + d + mask_names[m] + dtype_name(dt), include(header),
                     std::string("kiln::cuda::") + fn + "<" + device_type(dt) +
                         ", " + d + ", " + std::to_string(m) + ">",
                     {}};
  };
  JitKernel k = one(mask_kind);
  for (int m = 0; m < 3; ++m) {
    if (m == mask_kind) continue;
    JitKernel s = one(m);
    k.siblings.emplace_back(s.name, s.expression);
  }
  return k;
}

} // namespace

JitKernel flash_sdpa_kernel(Dtype dt, int head_dim, int mask_kind) {
  return flash_family("fSdpa", "flash_attention.cuh", "sdpa_flash", dt,
                      head_dim, mask_kind);
}

JitKernel flash_sdpa_bwd_kernel(Dtype dt, int head_dim, int mask_kind) {
  return flash_family("fSdpaBwd", "flash_attention_bwd.cuh", "sdpa_flash_bwd",
                      dt, head_dim, mask_kind);
}

int row_block_threads(int64_t n, Dtype dt) {
  int64_t chunks = (n + row_vec_width(dt) - 1) / row_vec_width(dt);
  // At most device/rows.cuh's max_row_block, the kernels' launch bound.
  return static_cast<int>(std::min<int64_t>(1024, (chunks + 31) / 32 * 32));
}

void launch_rows(CUfunction f, bool warp, int64_t rows, int64_t n, Dtype dt,
                 KernelArgs args, int stream) {
  if (warp) {
    int64_t rows_per_block = warp_block_threads / 32;
    launch_blocks(f, (rows + rows_per_block - 1) / rows_per_block,
                  warp_block_threads, args, stream);
  } else {
    launch_blocks(f, rows, row_block_threads(n, dt), args, stream);
  }
}

} // namespace kiln::cuda
