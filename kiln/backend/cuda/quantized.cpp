// QuantizedMatmul and Dequantize on the GPU (device/quantized.cuh).
//
// QuantizedMatmul, x @ dequantize(w).T: a few rows of x (a decode step, a
// few sequences, a speculative batch) read the packed codes directly, so
// the weight's traffic is bits / 16 of a float16 weight's: on tensor cores
// for float16/bfloat16 at 4 and 8 bits (2 to 16 rows, the codes read
// once), otherwise by the matvec (up to qmv_max_rows rows, every code read
// once per four rows). More rows dequantize the weight into x's dtype once
// and hand it to cuBLASLt, where the GEMM's FLOPs dominate. The ops make
// these primitives on GPU streams only for inputs the kernels take
// (row-major, float32/float16/bfloat16, the scales of x's dtype).
#include "kiln/backend/cuda/quantized.h"

#include <algorithm>
#include <string>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/gemm.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/primitives/quantized.h"

namespace kiln::cuda {

static_assert(qmv_max_rows == fast::QuantizedMatmul::max_picked_rows);

namespace {

const char* header = "#include \"kiln/backend/cuda/device/quantized.cuh\"\n";

std::string matvec_name(Dtype dt, int bits, int rows, int threads) {
  return "bQuantizedMatvec" + std::to_string(bits) + "r" +
         std::to_string(rows) + "t" + std::to_string(threads) +
         dtype_name(dt);
}

std::string matvec_expression(Dtype dt, int bits, int rows, int threads) {
  return std::string("kiln::cuda::quantized_matvec<") + device_type(dt) +
         ", " + std::to_string(bits) + ", " + std::to_string(rows) + ", " +
         std::to_string(threads) + ">";
}

} // namespace

JitKernel quantized_mma_kernel(Dtype dt, int bits) {
  return {"bQuantizedMma" + std::to_string(bits) + dtype_name(dt),
          header,
          std::string("kiln::cuda::quantized_mma<") + device_type(dt) + ", " +
              std::to_string(bits) + ">",
          {}};
}

JitKernel quantized_gemm_kernel(Dtype dt, int bits) {
  return {"bQuantizedGemm" + std::to_string(bits) + dtype_name(dt),
          header,
          std::string("kiln::cuda::quantized_gemm<") + device_type(dt) +
              ", " + std::to_string(bits) + ">",
          {}};
}

JitKernel sum_partials_kernel(Dtype dt) {
  return {std::string("vSumPartials") + dtype_name(dt), header,
          std::string("kiln::cuda::sum_partials<") + device_type(dt) + ">",
          {}};
}

JitKernel quantized_matvec_kernel(Dtype dt, int bits, int rows,
                                  int threads) {
  JitKernel k{matvec_name(dt, bits, rows, threads), header,
              matvec_expression(dt, bits, rows, threads), {}};
  for (int r : {1, 2, 4}) {
    if (r != rows) {
      k.siblings.emplace_back(matvec_name(dt, bits, r, threads),
                              matvec_expression(dt, bits, r, threads));
    }
  }
  return k;
}

int quantized_matvec_threads(int64_t k) {
  return k / 32 >= 128 ? 128 : k / 32 >= 64 ? 64 : 32;
}

int quantized_matvec_rows(int64_t m) { return m == 1 ? 1 : (m == 2 ? 2 : 4); }

void launch_matvec(CUfunction f, KernelArgs args, int64_t m, int64_t n,
                   int64_t batch, int rows, int threads, int stream) {
  LaunchShape shape;
  const int64_t block_rows = qmv_outputs * (qmv_threads / threads);
  shape.grid[0] = static_cast<unsigned>((n + block_rows - 1) / block_rows);
  shape.grid[1] = static_cast<unsigned>((m + rows - 1) / rows);
  shape.grid[2] = static_cast<unsigned>(batch);
  shape.block[0] = qmv_threads;
  set_current_device();
  submit_kernel(f, shape, args, stream);
}

JitKernel dequantize_kernel(Dtype scales, Dtype out, int bits) {
  return {"vDequantize" + std::to_string(bits) + dtype_name(scales) +
              dtype_name(out),
          header,
          std::string("kiln::cuda::dequantize<") + device_type(scales) + ", " +
              device_type(out) + ", " + std::to_string(bits) + ">",
          {}};
}

namespace {

// quantized_mma's blocks (device/quantized.cuh's qmma_max_warps, and 8 *
// qmma_weight_tiles weight rows), and the rows of x it takes. On an H200
// (benchmarks/quantized_bench.py --gpu, float16, 4 bits) it beat the
// matvec from 2 rows (8 rows of a 4096 x 14336 weight: 73 -> 24 us) but
// not at 1 (19.1 against 23.1 us); past 16 rows, where a block of 16 rows
// of x per weight block reads the codes again, quantized_gemm takes over.
constexpr int qmma_max_warps = 16, qmma_rows_per_block = 32;
// A warp's ring of codes: qmma_stages chunks of qmma_weight_tiles (4)
// rows' 512 bytes (device/quantized.cuh).
constexpr int qmma_stages = 4, qmma_slot_bytes = 4 * 512;
constexpr int64_t qmma_max_rows = 16;

// The kernel's mma.sync shapes need an Ampere or newer GPU.
bool mma_takes(Dtype dt, int bits, int64_t m) {
  return (dt == float16 || dt == bfloat16) && (bits == 4 || bits == 8) &&
         m >= 2 && m <= qmma_max_rows && device_info().major >= 8;
}

// Launches quantized_mma (arguments as quantized_matvec's) with as many
// warps over the inner dimension as fill the GPU (two blocks of eight
// warps per SM) and have chunks to take, and as the shared memory of
// their rings of codes allow.
void launch_mma(KernelArgs args, Dtype dt, int bits, int64_t m, int64_t n,
                int64_t k, int64_t batch, int stream) {
  KernelKey key('b', "QuantizedMma");
  key.add(static_cast<uint32_t>(bits)).add(static_cast<uint32_t>(dt.val));
  CUfunction f =
      find_kernel(key, [&] { return quantized_mma_kernel(dt, bits); });
  LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>((n + qmma_rows_per_block - 1) /
                                        qmma_rows_per_block);
  shape.grid[1] = static_cast<unsigned>((m + 15) / 16);
  shape.grid[2] = static_cast<unsigned>(batch);
  const int64_t blocks = int64_t(shape.grid[0]) * shape.grid[1] * batch;
  // The kernel's chunks: a quad of lanes' 16-byte loads, 512 / bits codes.
  const int64_t chunks = (k + 512 / bits - 1) / (512 / bits);
  const int64_t resident = int64_t(device_info().sm_count) * 16;
  const int64_t shared =
      static_cast<int64_t>(device_info().shared_per_block_optin);
  int warps = qmma_max_warps;
  while (warps > 1 && (warps / 2 >= chunks ||
                       (warps > 4 && blocks * (warps / 2) >= resident) ||
                       warps * qmma_stages * qmma_slot_bytes > shared)) {
    warps /= 2;
  }
  // A ring holds as many chunks as a warp takes, qmma_stages at most.
  const int64_t most = (chunks + warps - 1) / warps;
  const int bytes =
      warps * qmma_slot_bytes *
      (most < qmma_stages ? static_cast<int>(most) : qmma_stages);
  shape.block[0] = 32 * warps;
  shape.shared_bytes = static_cast<unsigned>(bytes);
  set_current_device();
  allow_shared_bytes(f, bytes);
  submit_kernel(f, shape, args, stream);
}

// quantized_gemm's block (device/quantized.cuh's qgemm_threads, qgemm_rows,
// qgemm_cols and qgemm_blocks_per_sm), and the most rows of x it takes at
// 4 and 8 bits. On an H200 (benchmarks/quantized_bench.py --gpu, float16,
// Llama-sized weights) it beat dequantize-then-GEMM by 1.07-1.70x at 24
// rows, and at 64 rows by 0.94-1.50x at 4 bits but 0.73-1.46x at 8 (whose
// chunks are half as long, each costing about as much); from 128 rows the
// GEMM's wgmma kernels won (0.5-0.9x). The mma.sync kernel is bound by
// its issue rate (about 12.6 instructions per mma, two blocks of 8 warps
// per SM); a form with codes and scales also staged through a three-deep
// cp.async pipeline was measured no faster (64 rows: 24.5 / 77.1 / 57.3
// us against 23.2 / 68.0 / 53.2).
constexpr int qgemm_threads = 256, qgemm_rows = 64, qgemm_cols = 128;
constexpr int qgemm_blocks_per_sm = 2;

int64_t qgemm_max_rows(int bits) { return bits == 4 ? 64 : 32; }

bool gemm_takes(Dtype dt, int bits, int64_t m) {
  return (dt == float16 || dt == bfloat16) && (bits == 4 || bits == 8) &&
         m > qmma_max_rows && m <= qgemm_max_rows(bits) &&
         device_info().major >= 8;
}

// The number of runs to split the inner dimension's `chunks` into over
// `blocks` blocks: the fewest that minimize the chunks each SM walks in
// turn (waves of resident blocks times chunks per run), runs of at least
// four chunks. A partial last wave costs as much as a full one: 32 blocks
// of 32 chunks on 132 SMs (264 resident) take 8 splits, one wave of 4
// chunks a block, where 5 would fill the GPU's SMs once and walk 7.
int gemm_splits(int64_t blocks, int64_t chunks, int64_t batch) {
  const int64_t resident =
      int64_t(device_info().sm_count) * qgemm_blocks_per_sm;
  const int64_t most = std::min<int64_t>(std::max<int64_t>(1, chunks / 4),
                                         65535 / batch);
  int64_t best = 1, best_cost = -1;
  for (int64_t s = 1; s <= most; ++s) {
    const int64_t waves = (blocks * s + resident - 1) / resident;
    const int64_t cost = waves * ((chunks + s - 1) / s);
    if (best_cost < 0 || cost < best_cost) best = s, best_cost = cost;
  }
  return static_cast<int>(best);
}

// Launches quantized_gemm over `batch` matrices with gemm_splits' runs of
// the inner dimension, the splits' float32 sums added by sum_partials.
void launch_gemm(const void* x, const void* w, const void* scales,
                 const void* biases, void* out, Dtype dt, int bits,
                 int group_size, int64_t m, int64_t n, int64_t k,
                 int64_t batch, const Stream& s) {
  KernelKey key('b', "QuantizedGemm");
  key.add(static_cast<uint32_t>(bits)).add(static_cast<uint32_t>(dt.val));
  CUfunction f =
      find_kernel(key, [&] { return quantized_gemm_kernel(dt, bits); });
  LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>((n + qgemm_cols - 1) / qgemm_cols);
  shape.grid[1] = static_cast<unsigned>((m + qgemm_rows - 1) / qgemm_rows);
  const int64_t blocks = int64_t(shape.grid[0]) * shape.grid[1] * batch;
  // The kernel's chunks: a quad of lanes' 16-byte loads, 512 / bits codes.
  const int64_t chunks = (k + 512 / bits - 1) / (512 / bits);
  int splits = gemm_splits(blocks, chunks, batch);
  shape.grid[2] = static_cast<unsigned>(batch * splits);
  shape.block[0] = qgemm_threads;
  const size_t size = static_cast<size_t>(batch * m * n);
  Scratch partial(splits > 1 ? size * splits * sizeof(float) : 0, s);
  float* pp = static_cast<float*>(partial.ptr);
  int gs = group_size;
  int64_t x_batch = m * k, w_batch = n * (k / 32 * bits),
          p_batch = n * (k / group_size), out_batch = m * n;
  void* args[] = {&x, &w, &scales, &biases, &out, &pp, &m, &n, &k, &gs,
                  &x_batch, &w_batch, &p_batch, &out_batch, &splits};
  set_current_device();
  submit_kernel(f, shape, args, s.index);
  if (splits == 1) return;
  KernelKey sum_key('v', "SumPartials");
  sum_key.add(static_cast<uint32_t>(dt.val));
  CUfunction g =
      find_kernel(sum_key, [&] { return sum_partials_kernel(dt); });
  int64_t n_out = static_cast<int64_t>(size);
  const float* cp = pp;
  void* sum_args[] = {&cp, &out, &n_out, &splits};
  launch(g, n_out, 1, sum_args, s.index);
}

// Writes dequantize(w) (blocks 32-code blocks) into out.
void dequantize_into(const void* w, const void* scales, const void* biases,
                     void* out, int64_t blocks, Dtype scales_dt, Dtype out_dt,
                     int group_size, int bits, const Stream& s) {
  KernelKey key('v', "Dequantize");
  key.add(static_cast<uint32_t>(bits))
      .add(static_cast<uint32_t>(scales_dt.val))
      .add(static_cast<uint32_t>(out_dt.val));
  CUfunction f = find_kernel(
      key, [&] { return dequantize_kernel(scales_dt, out_dt, bits); });
  void* args[] = {&w, &scales, &biases, &out, &blocks, &group_size};
  launch(f, blocks * 4, 1, args, s.index); // a thread per 8 codes
}

} // namespace

} // namespace kiln::cuda

namespace kiln::fast {

// inputs: x (..., K) or (B, M, K), w (N, W) or (B, N, W), scales and
// biases (N, G) or (B, N, G), all row-major; or x (P, M, K) and the
// indices (P,) of its matrices in w (read in place, by the matvec).
void QuantizedMatmul::eval_gpu(const std::vector<array>& inputs,
                               std::vector<array>& outputs) {
  const Stream& s = stream();
  array& out = outputs[0];
  const array &x = inputs[0], &w = inputs[1];
  Dtype dt = out.dtype();
  const bool picked = inputs.size() == 5;
  int64_t k = x.shape(-1), n = w.shape(-2);
  int64_t batch = picked ? x.shape(0) : (w.ndim() == 3 ? w.shape(0) : 1);
  int64_t m = k == 0 || batch == 0
                  ? 0
                  : static_cast<int64_t>(x.size()) / k / batch;
  const void* px = cuda::device_ptr(x, s);
  const void* pw = cuda::device_ptr(w, s);
  // Views at odd offsets (never made by kiln's ops), empty products and
  // picks with more rows than the matvec takes are left to the CPU.
  if (k == 0 || !cuda::aligned16(px) || !cuda::aligned16(pw) ||
      batch > 65535 || (picked && m > cuda::qmv_max_rows)) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  const void* ps = cuda::device_ptr(inputs[2], s);
  const void* pb = cuda::device_ptr(inputs[3], s);
  void* po = out.raw_data_ptr();
  int64_t groups = k / group_size_, words = w.shape(-1);
  const bool mma = cuda::mma_takes(dt, bits_, m);
  if (mma || m <= cuda::qmv_max_rows) {
    int gs = group_size_;
    int64_t x_batch = m * k, w_batch = n * words, p_batch = n * groups,
            out_batch = m * n;
    const void* index = picked ? cuda::device_ptr(inputs[4], s) : nullptr;
    int64_t w_count = w.ndim() == 3 ? w.shape(0) : 1;
    void* args[] = {&px,      &pw,      &ps,        &pb,    &po,
                    &m,       &n,       &k,         &gs,    &x_batch,
                    &w_batch, &p_batch, &out_batch, &index, &w_count};
    if (mma) {
      cuda::launch_mma(args, dt, bits_, m, n, k, batch, s.index);
      return;
    }
    int rows = cuda::quantized_matvec_rows(m);
    int threads = cuda::quantized_matvec_threads(k);
    cuda::KernelKey key('b', "QuantizedMatvec");
    key.add(static_cast<uint32_t>(bits_))
        .add(static_cast<uint32_t>(rows))
        .add(static_cast<uint32_t>(threads))
        .add(static_cast<uint32_t>(dt.val));
    int bits = bits_;
    CUfunction f = cuda::find_kernel(key, [&] {
      return cuda::quantized_matvec_kernel(dt, bits, rows, threads);
    });
    cuda::launch_matvec(f, args, m, n, batch, rows, threads, s.index);
    return;
  }
  if (cuda::gemm_takes(dt, bits_, m)) {
    cuda::launch_gemm(px, pw, ps, pb, po, dt, bits_, group_size_, m, n, k,
                      batch, s);
    return;
  }
  // Many rows: the weight dequantized into x's dtype, then one (batched)
  // GEMM, out = x @ wd^T with wd (N, K) row-major read transposed.
  cuda::Scratch wd(static_cast<size_t>(batch * n * k) * dt.size, s);
  cuda::dequantize_into(pw, ps, pb, wd.ptr, batch * n * k / 32,
                        inputs[2].dtype(), dt, group_size_, bits_, s);
  cuda::GemmArgs g;
  g.dtype = dt;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.a = {px, false, k, m * k};
  g.b = {wd.ptr, true, k, n * k};
  g.out = po;
  g.stream = s.index;
  if (!cuda::gemm(g)) cuda::eval_on_cpu(*this, inputs, outputs);
}

// inputs: w (..., W), scales and biases (..., G), row-major.
void Dequantize::eval_gpu(const std::vector<array>& inputs,
                          std::vector<array>& outputs) {
  const Stream& s = stream();
  array& out = outputs[0];
  const void* pw = cuda::device_ptr(inputs[0], s);
  if (!cuda::aligned16(pw)) {
    cuda::eval_on_cpu(*this, inputs, outputs);
    return;
  }
  cuda::set_device_output(out, s);
  if (out.size() == 0) return;
  cuda::dequantize_into(pw, cuda::device_ptr(inputs[1], s),
                        cuda::device_ptr(inputs[2], s), out.raw_data_ptr(),
                        static_cast<int64_t>(out.size()) / 32,
                        inputs[1].dtype(), out.dtype(), group_size_, bits_,
                        s);
}

} // namespace kiln::fast
