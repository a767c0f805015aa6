// Matmul and AddMM on the GPU through cuBLASLt (gemm.h). Operands are read
// in place when their last two strides are row- or column-major and their
// batch collapses to one stride; otherwise they are copied row-major first.
// AddMM with a packed bias vector over the last axis and beta == 1 uses the
// BIAS epilogue (alpha scales only the product); any other bias is copied
// into the output, which the GEMM then reads as C with beta. A product over
// an empty inner dimension (which cuBLASLt refuses) is written without a
// GEMM: zeros, or beta times the bias. GatherMM is one cuBLAS batched GEMM
// over address lists a kernel writes from the picks, so each picked matrix
// is read in place, or with sorted picks a grouped GEMM per matrix;
// SegmentedMM is a grouped GEMM over its segments.
#include <vector>

#include "kiln/backend/cuda/addresses.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cublas.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/gemm.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/layout.h"
#include "kiln/primitives/linalg.h"

namespace kiln::cuda {

namespace {

struct Operand {
  array arr{0.0f};     // the operand, or its row-major copy when needed
  bool transposed = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// One stride for the whole batch (batch dims of size 1 ignored), or -1
// when there is none or it is negative (a reversed batch is copied).
int64_t batch_stride(const array& x, size_t nb) {
  int64_t stride = 0, extent = 1;
  bool found = false;
  for (int i = static_cast<int>(nb) - 1; i >= 0; --i) {
    int64_t n = x.shape()[i], s = x.strides()[i];
    if (n == 1) continue;
    if (s < 0) return -1;
    if (!found) {
      stride = s;
      found = true;
    } else if (s != stride * extent) {
      return -1;
    }
    extent *= n;
    if (stride == 0 && s != 0) return -1;
  }
  return stride;
}

bool read_in_place(const array& x, size_t nb, Operand& op) {
  int64_t rows = x.shape(-2), cols = x.shape(-1);
  int64_t sr = x.strides()[nb], sc = x.strides()[nb + 1];
  int64_t bs = batch_stride(x, nb);
  if (bs < 0) return false;
  op.batch_stride = bs;
  if ((sc == 1 || cols == 1) && sr >= cols && sr > 0) {
    op.transposed = false;
    op.ld = sr;
    return true;
  }
  if ((sr == 1 || rows == 1) && sc >= rows && sc > 0) {
    op.transposed = true;
    op.ld = sc;
    return true;
  }
  return false;
}

// The operand as cuBLASLt reads it, copying it row-major when its layout is
// not one cuBLASLt takes.
bool prepare(const array& x, size_t nb, const Stream& s, Operand& op) {
  op.arr = x;
  if (read_in_place(x, nb, op)) return true;
  array tmp = array::uninitialized(x.shape(), x.dtype());
  if (!copy_row_major(x, tmp, s)) return false;
  op.arr = tmp;
  return read_in_place(tmp, nb, op);
}

// out = alpha * a @ b (+ bias epilogue) (+ beta * out when beta != 0).
// Returns false when the GPU cannot run it.
bool run_gemm(const array& a_in, const array& b_in, array& out, float alpha,
              float beta, const array* bias, const Stream& s) {
  if (!gemm_supports(out.dtype()) || a_in.dtype() != out.dtype() ||
      b_in.dtype() != out.dtype()) {
    return false;
  }
  size_t nb = out.ndim() - 2;
  Operand a, b;
  if (!prepare(a_in, nb, s, a) || !prepare(b_in, nb, s, b)) return false;
  GemmArgs g;
  g.dtype = out.dtype();
  g.m = out.shape(-2);
  g.n = out.shape(-1);
  g.k = a_in.shape(-1);
  g.batch = 1;
  for (size_t i = 0; i < nb; ++i) g.batch *= out.shape()[i];
  // A shared b and a row-major a whose batch follows its rows: one GEMM
  // with batch * M rows instead of a batch.
  if (g.batch > 1 && b.batch_stride == 0 && !a.transposed &&
      a.batch_stride == g.m * a.ld) {
    g.m *= g.batch;
    g.batch = 1;
  }
  g.a = {device_ptr(a.arr, s), a.transposed, a.ld, a.batch_stride};
  g.b = {device_ptr(b.arr, s), b.transposed, b.ld, b.batch_stride};
  g.out = out.raw_data_ptr();
  g.alpha = alpha;
  g.beta = beta;
  g.bias = bias ? device_ptr(*bias, s) : nullptr;
  g.stream = s.index;
  return gemm(g);
}

// A packed vector of length N in out's dtype, 16-byte aligned (cuBLASLt
// faults on less on some GPUs): the bias epilogue can read it (not for
// complex64, which cuBLASLt's epilogues do not take).
bool epilogue_bias(const array& c, const array& out, float beta) {
  return beta == 1.0f && out.dtype() != complex64 && c.ndim() == 1 &&
         c.shape(0) == out.shape(-1) &&
         (c.strides()[0] == 1 || c.shape(0) == 1) &&
         c.dtype() == out.dtype() && c.offset() % 16 == 0;
}

// GatherMM with picks sorted by b's matrix (the op's sorted_indices hint):
// one GEMM per matrix over all its picks' rows (cuBLAS's grouped GEMM), so
// each matrix is read once rather than once per pick. The groups come from
// rhs read back (a wait for the stream); a hint that proves wrong, or a
// cuBLAS without grouped GEMMs, leaves this false with nothing written.
bool run_gather_mm_grouped(const array& a_in, const Operand& b,
                           const array& lhs, const array& rhs, array& out,
                           const Stream& s) {
  int64_t picks = rhs.size(), nb = b.arr.shape(0);
  int64_t m = out.shape(-2), n = out.shape(-1), k = a_in.shape(-1);
  std::vector<uint32_t> raw(static_cast<size_t>(picks));
  cudaStream_t st = cuda_stream(s);
  KILN_CHECK_CUDA(cudaMemcpyAsync(raw.data(), device_ptr(rhs, s),
                                  raw.size() * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, st));
  KILN_CHECK_CUDA(cudaStreamSynchronize(st));
  // Runs of picks of one matrix: (matrix, first pick, count).
  std::vector<int> rows;
  std::vector<int64_t> matrix, first;
  for (int64_t p = 0; p < picks; ++p) {
    int64_t e = GatherMM::pick(raw[p], nb);
    if (!matrix.empty() && e < matrix.back()) return false;
    if (matrix.empty() || e != matrix.back()) {
      matrix.push_back(e);
      first.push_back(p);
      rows.push_back(0);
    }
    rows.back() += static_cast<int>(m);
  }
  // The picked a matrices row-major one after another, so each group's
  // rows are one packed block (the output's rows already are).
  size_t item = out.itemsize();
  Scratch packed(static_cast<size_t>(picks * m * k) * item, s);
  const Strides& as = a_in.strides();
  picked_matrices(device_ptr(a_in, s), device_ptr(lhs, s), a_in.shape(0),
                  as[0], as[1], as[2], m, k, picks, item, packed.ptr, s);
  size_t groups = rows.size();
  std::vector<const void*> ptrs(3 * groups);
  auto* a0 = static_cast<const char*>(packed.ptr);
  auto* b0 = static_cast<const char*>(device_ptr(b.arr, s));
  auto* c0 = static_cast<char*>(out.raw_data_ptr());
  for (size_t g = 0; g < groups; ++g) {
    ptrs[g] = a0 + first[g] * m * k * item;
    ptrs[groups + g] = b0 + matrix[g] * b.batch_stride * item;
    ptrs[2 * groups + g] = c0 + first[g] * m * n * item;
  }
  Scratch list(ptrs.size() * sizeof(void*), s);
  // From pageable memory: staged before the call returns.
  KILN_CHECK_CUDA(cudaMemcpyAsync(list.ptr, ptrs.data(),
                                  ptrs.size() * sizeof(void*),
                                  cudaMemcpyHostToDevice, cuda_stream(s)));
  auto** lp = static_cast<void**>(list.ptr);
  std::vector<int> ks(groups, static_cast<int>(k));
  return cublas::gemm_grouped(rows, ks, n, out.dtype(), lp, false, k,
                              lp + groups, b.transposed, b.ld,
                              lp + 2 * groups, s);
}

// GatherMM's products: grouped by b's matrix when the picks are sorted
// and share matrices, else one batched GEMM over the picks' addresses.
// False when the GPU cannot run it.
bool run_gather_mm(const std::vector<array>& inputs, bool rhs_sorted,
                   array& out, const Stream& s) {
  const array& a_in = inputs[0];
  const array& b_in = inputs[1];
  int64_t picks = inputs[2].size();
  int64_t m = out.shape(-2), n = out.shape(-1), k = a_in.shape(-1);
  constexpr int64_t int_max = 2147483647;
  if (!cublas::available() || !cublas::gemm_batched_supports(out.dtype()) ||
      picks > int_max || m > int_max || n > int_max || k > int_max) {
    return false;
  }
  Operand a, b;
  array lhs = inputs[2], rhs = inputs[3];
  if (!prepare(a_in, 1, s, a) || !prepare(b_in, 1, s, b) ||
      !row_contiguous(inputs[2], lhs, s) ||
      !row_contiguous(inputs[3], rhs, s)) {
    return false;
  }
  // Worth a wait for the stream: picks share matrices, and each group's
  // rows are a GEMM of some height.
  if (rhs_sorted && picks >= 2 * b_in.shape(0) && picks * m >= 64 &&
      picks * m <= int_max &&
      run_gather_mm_grouped(a_in, b, lhs, rhs, out, s)) {
    return true;
  }
  size_t item = out.itemsize();
  Scratch list(3 * static_cast<size_t>(picks) * sizeof(void*), s);
  gather_mm_addresses(list, device_ptr(lhs, s), device_ptr(rhs, s),
                      device_ptr(a.arr, s), device_ptr(b.arr, s),
                      out.raw_data_ptr(), a_in.shape(0), b_in.shape(0),
                      a.batch_stride * item, b.batch_stride * item,
                      m * n * item, picks, s);
  auto** ptrs = static_cast<void**>(list.ptr);
  cublas::gemm_batched(m, n, k, out.dtype(), ptrs, a.transposed, a.ld,
                       ptrs + picks, b.transposed, b.ld, ptrs + 2 * picks,
                       picks, s);
  return true;
}

// SegmentedMM: the segments read back (a wait for the stream), the output
// zeroed (empty segments stay so), and one grouped GEMM over the others,
// each reading its columns of a and rows of b in place. False when the GPU
// cannot run it.
bool run_segmented_mm(const std::vector<array>& inputs, array& out,
                      const Stream& s) {
  const array& a_in = inputs[0];
  const array& b_in = inputs[1];
  int64_t m = a_in.shape(0), k = a_in.shape(1), n = b_in.shape(1);
  int64_t count = out.shape(0);
  constexpr int64_t int_max = 2147483647;
  if (!cublas::available() || !cublas::gemm_batched_supports(out.dtype()) ||
      m > int_max || n > int_max || k > int_max) {
    return false;
  }
  Operand a, b;
  array seg = inputs[2];
  if (!prepare(a_in, 0, s, a) || !prepare(b_in, 0, s, b) ||
      !row_contiguous(inputs[2], seg, s)) {
    return false;
  }
  std::vector<uint32_t> raw(static_cast<size_t>(2 * count));
  cudaStream_t st = cuda_stream(s);
  KILN_CHECK_CUDA(cudaMemcpyAsync(raw.data(), device_ptr(seg, s),
                                  raw.size() * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, st));
  KILN_CHECK_CUDA(cudaStreamSynchronize(st));
  KILN_CHECK_CUDA(cudaMemsetAsync(out.raw_data_ptr(), 0, out.nbytes(), st));
  size_t item = out.itemsize();
  // Column `start` of a and row `start` of b, in elements.
  int64_t a_step = a.transposed ? a.ld : 1, b_step = b.transposed ? 1 : b.ld;
  auto* a0 = static_cast<const char*>(device_ptr(a.arr, s));
  auto* b0 = static_cast<const char*>(device_ptr(b.arr, s));
  auto* c0 = static_cast<char*>(out.raw_data_ptr());
  std::vector<int> ms, ks;
  std::vector<const void*> as, bs, cs;
  for (int64_t g = 0; g < count; ++g) {
    auto [start, end] = SegmentedMM::bounds(raw[2 * g], raw[2 * g + 1], k);
    if (end == start) continue;
    ms.push_back(static_cast<int>(m));
    ks.push_back(static_cast<int>(end - start));
    as.push_back(a0 + start * a_step * item);
    bs.push_back(b0 + start * b_step * item);
    cs.push_back(c0 + g * m * n * item);
  }
  if (ms.empty()) return true;
  size_t groups = ms.size();
  std::vector<const void*> ptrs = as;
  ptrs.insert(ptrs.end(), bs.begin(), bs.end());
  ptrs.insert(ptrs.end(), cs.begin(), cs.end());
  Scratch list(ptrs.size() * sizeof(void*), s);
  KILN_CHECK_CUDA(cudaMemcpyAsync(list.ptr, ptrs.data(),
                                  ptrs.size() * sizeof(void*),
                                  cudaMemcpyHostToDevice, cuda_stream(s)));
  auto** lp = static_cast<void**>(list.ptr);
  return cublas::gemm_grouped(ms, ks, n, out.dtype(), lp, a.transposed, a.ld,
                              lp + groups, b.transposed, b.ld,
                              lp + 2 * groups, s);
}

} // namespace

} // namespace kiln::cuda

namespace kiln {

namespace {

// x seen over shape, which it broadcasts to, without copying it.
array broadcast_view(const array& x, const Shape& shape) {
  Strides st = broadcast_strides(x, shape);
  auto l = layout_of(shape, st);
  array v = array::uninitialized(shape, x.dtype());
  v.copy_shared_buffer(x, st, l.flags, l.data_size);
  return v;
}

// out = beta * c (c as addmm broadcasts it), what a product over an empty
// inner dimension leaves: zeros (a memset) when beta is 0 or there is no
// c. False when the elementwise kernels cannot scale c.
bool empty_product(const array* c, float beta, array& out, const Stream& s) {
  if (!c || beta == 0.0f) {
    cuda::set_device_output(out, s);
    KILN_CHECK_CUDA(cudaMemsetAsync(out.raw_data_ptr(), 0, out.nbytes(),
                                    cuda::cuda_stream(s)));
    return true;
  }
  array cb = c->shape() == out.shape() ? *c : broadcast_view(*c, out.shape());
  array scale = broadcast_view(array(beta, out.dtype()), out.shape());
  // Row-major as every GEMM output (and the CPU's), not c's broadcast layout.
  return cuda::elementwise("Multiply", {cb, scale}, out, s, true);
}

} // namespace

void Matmul::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  bool gpu = cuda::gemm_supports(out.dtype());
  if (gpu && a.shape(-1) == 0) {
    empty_product(nullptr, 0.0f, out, stream());
    return;
  }
  if (gpu) {
    cuda::set_device_output(out, stream());
    if (out.size() == 0) return;
    gpu = cuda::run_gemm(a, b, out, 1.0f, 0.0f, nullptr, stream());
  }
  if (!gpu) cuda::eval_on_cpu(*this, inputs, out);
}

void AddMM::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& c = inputs[0];
  const array& a = inputs[1];
  const array& b = inputs[2];
  if (!cuda::gemm_supports(out.dtype())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  if (out.size() == 0) {
    cuda::set_device_output(out, stream());
    return;
  }
  if (a.shape(-1) == 0) {
    if (!empty_product(&c, beta_, out, stream())) {
      cuda::eval_on_cpu(*this, inputs, out);
    }
    return;
  }
  // The bias is an input like a and b: device_ptr orders this stream after
  // its producer and keeps its memory until the GEMM is done with it.
  if (cuda::epilogue_bias(c, out, beta_)) {
    cuda::set_device_output(out, stream());
    if (cuda::run_gemm(a, b, out, alpha_, 0.0f, &c, stream())) return;
  }
  // General path: out = broadcast(c), then out = alpha * a @ b + beta * out.
  // A bias vector is seen over the whole output without copying it.
  array cb = c.ndim() == 1 && out.ndim() > 1 ? broadcast_view(c, out.shape())
                                             : c;
  if (beta_ == 0.0f || !cuda::copy_row_major(cb, out, stream())) {
    if (beta_ == 0.0f) {
      cuda::set_device_output(out, stream());
      if (cuda::run_gemm(a, b, out, alpha_, 0.0f, nullptr, stream())) return;
    }
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  if (!cuda::run_gemm(a, b, out, alpha_, beta_, nullptr, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void GatherMM::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::gemm_supports(out.dtype())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  if (inputs[0].shape(-1) == 0 || out.size() == 0) {
    empty_product(nullptr, 0.0f, out, stream());
    return;
  }
  cuda::set_device_output(out, stream());
  if (!cuda::run_gather_mm(inputs, rhs_sorted_, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void SegmentedMM::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::gemm_supports(out.dtype())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  cuda::set_device_output(out, stream());
  if (out.size() == 0) return;
  if (!cuda::run_segmented_mm(inputs, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

} // namespace kiln
