// Convolution on the GPU: cuDNN's engines where cuDNN is present and takes
// the problem (cudnn_conv.h), else as on the CPU an explicit im2col and a
// GEMM: the im2col kernel (device/conv.cuh) writes a tile of the patch
// matrix into scratch, stored (groups, rows, columns), and one cuBLASLt
// GEMM batched over the groups multiplies each group's patches by that
// group's weight rows into its columns of the row-major output. The weight
// (C_out, K..., C_in/groups) is read in place as the transposed right
// operand. A 1x1 kernel with unit stride and no padding multiplies the
// input itself. float32/float16/bfloat16/float64; anything else runs on
// the CPU.
#include "kiln/backend/cuda/conv.h"

#include <algorithm>
#include <atomic>
#include <climits>

#include "kiln/backend/common/conv_geometry.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cudnn_conv.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/gemm.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/primitives/conv.h"

namespace kiln::cuda {

namespace {

constexpr size_t default_scratch_limit = size_t(256) << 20;
// Larger limits would let a tile pass the kernel's 32-bit element count.
constexpr size_t max_scratch_limit = size_t(1) << 30;
// When one patch row exceeds the scratch, the reduction is split into
// column chunks of at least this many per group (as long as one row of
// each group fits), so each GEMM keeps a useful K.
constexpr int64_t min_split_cols = 4096;
// device/conv.cuh's conv_max_nd: conv1d, conv2d and conv3d.
constexpr int max_spatial_axes = 3;

std::atomic<size_t>& scratch_limit_bytes() {
  static std::atomic<size_t> bytes{default_scratch_limit};
  return bytes;
}

// Host twin of device/conv.cuh's Im2ColParams: same members, same order.
struct Im2ColParams {
  int64_t in_stride[max_spatial_axes];
  int64_t batch_stride;
  int64_t chan_stride;
  int64_t row0, col0;
  int64_t rows, cols;
  int32_t in_len[max_spatial_axes];
  int32_t out_len[max_spatial_axes];
  int32_t k_len[max_spatial_axes];
  int32_t stride[max_spatial_axes];
  int32_t pad_lo[max_spatial_axes];
  int32_t k_dil[max_spatial_axes];
  int32_t in_dil[max_spatial_axes];
  int32_t cg;
  int32_t groups;
  int32_t flip;
};
static_assert(sizeof(Im2ColParams) == 168);

Im2ColParams im2col_params(const Convolution& p,
                           const detail::ConvGeometry& g) {
  Im2ColParams ip{};
  for (int d = 0; d < g.nd; ++d) {
    ip.in_stride[d] = g.in_stride[d];
    ip.in_len[d] = static_cast<int32_t>(g.in_len[d]);
    ip.out_len[d] = static_cast<int32_t>(g.out_len[d]);
    ip.k_len[d] = static_cast<int32_t>(g.k_len[d]);
    ip.stride[d] = p.stride()[d];
    ip.pad_lo[d] = p.padding_lo()[d];
    ip.k_dil[d] = p.kernel_dilation()[d];
    ip.in_dil[d] = p.input_dilation()[d];
  }
  ip.batch_stride = g.in_batch_stride;
  ip.chan_stride = g.in_chan_stride;
  ip.cg = static_cast<int32_t>(g.cg);
  ip.groups = static_cast<int32_t>(g.groups);
  ip.flip = p.flip();
  return ip;
}

const char* as_bytes(const void* p) { return static_cast<const char*>(p); }

// The tile of the patch matrix one GEMM takes: rows (output positions) by
// columns of each group's kernel_size * cg, within the scratch limit.
struct Tile {
  int64_t rows, cols;
};

Tile tile_of(const detail::ConvGeometry& g, int64_t rows, int64_t kc,
             size_t itemsize) {
  int64_t budget = static_cast<int64_t>(conv_scratch_limit() / itemsize);
  budget = std::max<int64_t>(budget, 1);
  if (g.groups * kc <= budget)
    return {std::min(rows, budget / (g.groups * kc)), kc};
  // One row of every group is too large: split the reduction.
  int64_t tr =
      std::clamp<int64_t>(budget / (g.groups * min_split_cols), 1, rows);
  return {tr, std::clamp<int64_t>(budget / (g.groups * tr), 1, kc)};
}

// out = conv(in, w) on stream s. False when the GPU path cannot run it
// (the caller then runs the CPU's).
bool run_conv(const Convolution& p, const array& in, const array& w, array& out,
              const Stream& s) {
  Dtype dt = out.dtype();
  int nd = static_cast<int>(in.ndim()) - 2;
  if (!gemm_supports(dt) || in.dtype() != dt || w.dtype() != dt || nd < 1 ||
      nd > max_spatial_axes) {
    return false;
  }
  auto g = detail::conv_geometry(in, w, out);
  int64_t rows = g.n * g.out_spatial, kc = g.kernel_size * g.cg;
  if (out.size() == 0) {
    set_device_output(out, s);
    return true;
  }
  if (kc == 0) { // no input channels: every sum is empty
    set_device_output(out, s);
    KILN_CHECK_CUDA(
        cudaMemsetAsync(out.raw_data_ptr(), 0, out.nbytes(), cuda_stream(s)));
    return true;
  }
  bool pointwise = detail::conv_is_pointwise(p, g, in) && rows <= INT32_MAX;
  // cuDNN's implicit GEMMs where it takes the problem; a pointwise
  // convolution is a GEMM on the input already.
  if (!pointwise && cudnn_conv(p, in, w, out, s)) return true;
  Tile tile = tile_of(g, rows, kc, dt.size);
  // A split reduction adds each chunk's product to the output: float16/
  // bfloat16 accumulate those in float32 (patches, weight and output) and
  // round once at the end, as the CPU's float32 GEMM does.
  Dtype acc = !pointwise && tile.cols < kc && dt.size == 2 ? float32 : dt;
  if (acc != dt) tile = tile_of(g, rows, kc, acc.size);
  // The weight as a row-major (C_out, kc) matrix: read transposed, each
  // group's cog rows one batch entry.
  array wm = w;
  if (acc != dt) {
    wm = array::uninitialized(w.shape(), acc);
    if (!copy_row_major(w, wm, s)) return false;
  } else if (!row_contiguous(w, wm, s)) {
    return false;
  }
  const char* wp = as_bytes(device_ptr(wm, s));
  array acc_out = out;
  if (acc != dt) acc_out = array::uninitialized(out.shape(), acc);
  set_device_output(acc_out, s);
  char* op = static_cast<char*>(acc_out.raw_data_ptr());
  size_t item = acc.size;

  GemmArgs ga;
  ga.dtype = acc;
  ga.n = g.cog;
  ga.batch = g.groups;
  ga.out_ld = g.c_out;
  ga.out_batch_stride = g.cog;
  ga.stream = s.index;

  if (pointwise) {
    // Row r of the input is output position r; group grp reads its cg
    // channels at offset grp * cg.
    ga.m = rows;
    ga.k = g.cg;
    ga.a = {device_ptr(in, s), false, g.c_in, g.cg};
    ga.b = {wp, true, kc, g.cog * kc};
    ga.out = op;
    return gemm(ga);
  }

  Scratch patches(static_cast<size_t>(g.groups * tile.rows * tile.cols) * item,
                  s);
  bool i64 = rows > UINT32_MAX || kc > UINT32_MAX;
  CUfunction f = get_kernel(im2col_kernel(dt, acc, nd, i64));
  Im2ColParams ip = im2col_params(p, g);
  const void* ip_in = device_ptr(in, s);
  void* ip_out = patches.ptr;
  void* args[] = {&ip_in, &ip_out, &ip};
  for (int64_t r0 = 0; r0 < rows; r0 += tile.rows) {
    int64_t nr = std::min(tile.rows, rows - r0);
    for (int64_t c0 = 0; c0 < kc; c0 += tile.cols) {
      int64_t nc = std::min(tile.cols, kc - c0);
      ip.row0 = r0;
      ip.col0 = c0;
      ip.rows = nr;
      ip.cols = nc;
      launch(f, g.groups * nr * nc, 1, args, s.index);
      ga.m = nr;
      ga.k = nc;
      ga.a = {patches.ptr, false, nc, nr * nc};
      ga.b = {wp + c0 * item, true, kc, g.cog * kc};
      ga.out = op + r0 * g.c_out * item;
      // A split reduction adds each chunk's product to the previous ones.
      ga.beta = c0 > 0 ? 1.0f : 0.0f;
      if (!gemm(ga)) return false;
    }
  }
  return acc == dt || copy_row_major(acc_out, out, s);
}

} // namespace

JitKernel im2col_kernel(Dtype in, Dtype out, int nd, bool i64) {
  std::string suffix =
      (out != in ? "_" + dtype_name(out) : std::string()) + (i64 ? "_i64" : "");
  auto one = [&](int d) {
    return JitKernel{"gIm2Col" + std::to_string(d) + dtype_name(in) + suffix,
                     "#include \"kiln/backend/cuda/device/conv.cuh\"\n",
                     std::string("kiln::cuda::im2col<") + device_type(in) +
                         ", " + device_type(out) + ", " + std::to_string(d) +
                         ", " + (i64 ? "long long" : "unsigned int") + ">",
                     {}};
  };
  JitKernel k = one(nd);
  for (int d = 1; d <= max_spatial_axes; ++d) {
    if (d == nd) continue;
    JitKernel other = one(d);
    k.siblings.emplace_back(other.name, other.expression);
  }
  return k;
}

void set_conv_scratch_limit(size_t bytes) {
  scratch_limit_bytes() =
      bytes == 0 ? default_scratch_limit : std::min(bytes, max_scratch_limit);
}

size_t conv_scratch_limit() { return scratch_limit_bytes(); }

} // namespace kiln::cuda

namespace kiln {

// The kernels' geometry holds three spatial axes; the dtypes conv takes
// (floating point) all have GEMMs.
std::string Convolution::gpu_declines(const std::vector<array>&) const {
  if (stride_.size() > static_cast<size_t>(cuda::max_spatial_axes)) {
    return "a convolution over " + std::to_string(stride_.size()) +
           " spatial axes (the GPU's take up to " +
           std::to_string(cuda::max_spatial_axes) + ")";
  }
  return {};
}

void Convolution::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::run_conv(*this, inputs[0], inputs[1], out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

// cuDNN's wgrad reads x and the cotangent in place; without it the
// fallback's convolution (with its copies) runs on the GPU.
void ConvolutionWeightGrad::eval_gpu(const std::vector<array>& inputs,
                                     std::vector<array>& outputs) {
  if (!cuda::cudnn_conv_weight_grad(*this, inputs[0], inputs[1], outputs[0],
                                    stream())) {
    eval_fallback(inputs, outputs);
  }
}

} // namespace kiln
