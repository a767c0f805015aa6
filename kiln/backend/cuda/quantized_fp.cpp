// QuantizedMatmulFp and DequantizeFp on the GPU
// (device/quantized_fp.cuh): the microscaling modes' few-row product read
// straight from the codes (a decode step over an mxfp4 weight moves a
// quarter of a bfloat16 weight's bytes), and their dequantize in one pass
// (more rows: the weight dequantized once, then cuBLASLt, as the graph
// composes it).
#include <string>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/quantized.h"
#include "kiln/primitives/quantized.h"

namespace kiln::cuda {

namespace {

const char* header = "#include \"kiln/backend/cuda/device/quantized_fp.cuh\"\n";

std::string matvec_fp_name(Dtype dt, int bits, int group_size, int rows,
                           int threads) {
  return "bQuantizedMatvecFp" + std::to_string(bits) + "g" +
         std::to_string(group_size) + "r" + std::to_string(rows) + "t" +
         std::to_string(threads) + dtype_name(dt);
}

std::string matvec_fp_expression(Dtype dt, int bits, int group_size,
                                 int rows, int threads) {
  return std::string("kiln::cuda::quantized_matvec_fp<") + device_type(dt) +
         ", " + std::to_string(bits) + ", " + std::to_string(group_size) +
         ", " + std::to_string(rows) + ", " + std::to_string(threads) + ">";
}

} // namespace

JitKernel quantized_matvec_fp_kernel(Dtype dt, int bits, int group_size,
                                     int rows, int threads) {
  JitKernel k{matvec_fp_name(dt, bits, group_size, rows, threads), header,
              matvec_fp_expression(dt, bits, group_size, rows, threads), {}};
  for (int r : {1, 2, 4}) {
    if (r != rows) {
      k.siblings.emplace_back(
          matvec_fp_name(dt, bits, group_size, r, threads),
          matvec_fp_expression(dt, bits, group_size, r, threads));
    }
  }
  return k;
}

JitKernel dequantize_fp_kernel(Dtype out, int bits, int group_size) {
  return {"vDequantizeFp" + std::to_string(bits) + "g" +
              std::to_string(group_size) + dtype_name(out),
          header,
          std::string("kiln::cuda::dequantize_fp<") + device_type(out) + ", " +
              std::to_string(bits) + ", " + std::to_string(group_size) + ">",
          {}};
}

} // namespace kiln::cuda

namespace kiln::fast {

// inputs: x (..., K) with w (N, W) and scales (N, G); or x (P, M, K), w
// (E, N, W), scales (E, N, G) and the picks' indices (P,); all row-major.
void QuantizedMatmulFp::eval_gpu(const std::vector<array>& inputs,
                                 std::vector<array>& outputs) {
  const Stream& s = stream();
  array& out = outputs[0];
  const array &x = inputs[0], &w = inputs[1];
  const bool picked = inputs.size() == 4;
  int64_t k = x.shape(-1), n = w.shape(-2);
  int64_t batch = picked ? x.shape(0) : 1;
  int64_t m = k == 0 || batch == 0
                  ? 0
                  : static_cast<int64_t>(x.size()) / k / batch;
  const void* px = cuda::device_ptr(x, s);
  const void* pw = cuda::device_ptr(w, s);
  // The ops make this node for at most qmv_max_rows rows and k a multiple
  // of 32; views at odd offsets (never made by kiln's ops) go to the CPU.
  if (k % 32 != 0 || m > cuda::qmv_max_rows || !cuda::aligned16(px) ||
      !cuda::aligned16(pw) || batch > 65535) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  const void* ps = cuda::device_ptr(inputs[2], s);
  void* po = out.raw_data_ptr();
  const int64_t words = w.shape(-1), groups = k / group_size_;
  int64_t x_batch = m * k, w_batch = n * words, p_batch = n * groups,
          out_batch = m * n;
  const void* index = picked ? cuda::device_ptr(inputs[3], s) : nullptr;
  int64_t w_count = w.ndim() == 3 ? w.shape(0) : 1;
  void* args[] = {&px,      &pw,      &ps,        &po,    &m,
                  &n,       &k,       &x_batch,   &w_batch, &p_batch,
                  &out_batch, &index, &w_count};
  const Dtype dt = out.dtype();
  const int rows = cuda::quantized_matvec_rows(m);
  const int threads = cuda::quantized_matvec_threads(k);
  const int bits = bits_, gs = group_size_;
  cuda::KernelKey key('b', "QuantizedMatvecFp");
  key.add(static_cast<uint32_t>(bits))
      .add(static_cast<uint32_t>(gs))
      .add(static_cast<uint32_t>(rows))
      .add(static_cast<uint32_t>(threads))
      .add(static_cast<uint32_t>(dt.val));
  CUfunction f = cuda::find_kernel(key, [&] {
    return cuda::quantized_matvec_fp_kernel(dt, bits, gs, rows, threads);
  });
  cuda::launch_matvec(f, args, m, n, batch, rows, threads, s.index);
}

// inputs: w (..., W) uint32, scales (..., G) uint8, and optionally the
// float32 factor (a scalar); row-major.
void DequantizeFp::eval_gpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  const Stream& s = stream();
  array& out = outputs[0];
  const void* pw = cuda::device_ptr(inputs[0], s);
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  const void* ps = cuda::device_ptr(inputs[1], s);
  const void* pf = inputs.size() > 2 ? cuda::device_ptr(inputs[2], s)
                                     : nullptr;
  void* po = out.raw_data_ptr();
  int64_t runs = static_cast<int64_t>(out.size()) / 8;
  const Dtype dt = out.dtype();
  const int bits = bits_, gs = group_size_;
  cuda::KernelKey key('v', "DequantizeFp");
  key.add(static_cast<uint32_t>(bits))
      .add(static_cast<uint32_t>(gs))
      .add(static_cast<uint32_t>(dt.val));
  CUfunction f = cuda::find_kernel(
      key, [&] { return cuda::dequantize_fp_kernel(dt, bits, gs); });
  void* args[] = {&pw, &ps, &pf, &po, &runs};
  cuda::launch(f, runs, 1, args, s.index);
}

} // namespace kiln::fast
