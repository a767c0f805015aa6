// Scans on the GPU (device/scan.cuh). The output is row-major, as on the
// CPU; dtype pairs the CPU does not scan and inputs whose other axes do not
// collapse to max_ndim dimensions run on the CPU.
#include "kiln/backend/cuda/axis_kernels.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/primitives/reduction.h"

namespace kiln::cuda {

namespace {

const char* scan_source = "#include \"kiln/backend/cuda/device/scan.cuh\"\n";

/** Lines along an outer axis are scanned one per thread (coalesced across
 *  columns) once there are this many; fewer get a block each. */
constexpr int64_t column_min_lines = 4096;

std::string scan_name(char pattern, const std::string& op, Dtype in,
                      Dtype out) {
  std::string n = pattern + ("Scan" + op) + dtype_name(in);
  if (out != in) n += "_" + dtype_name(out);
  return n;
}

std::string scan_expression(char pattern, const std::string& op, Dtype in,
                            Dtype out) {
  std::string args =
      "kiln::cuda::" + op + ", " + device_type(in) + ", " + device_type(out);
  if (pattern == 'c') return "kiln::cuda::scan_columns<" + args + ">";
  Tile t = pattern == 's' ? short_scan_tile : long_scan_tile(in.size);
  std::string threads = std::to_string(t.threads);
  if (pattern == 't')
    return "kiln::cuda::scan_chunk_totals<" + args + ", " + threads + ">";
  std::string kernel = pattern == 'k' ? "scan_chunks" : "scan_lines";
  return "kiln::cuda::" + kernel + "<" + args + ", " + threads + ", " +
         std::to_string(t.items) + ">";
}

const char* scan_op(Scan::Type t) {
  switch (t) {
    case Scan::Sum: return "Add";
    case Scan::Prod: return "Multiply";
    case Scan::Max: return "Maximum";
    case Scan::Min: return "Minimum";
    case Scan::LogAddExp: return "LogAddExp";
  }
  return nullptr;
}

// The dtype pairs backend/cpu/scan.cpp scans (anything else is its error).
bool scans_on_gpu(Scan::Type t, Dtype in, Dtype out) {
  // complex64 in its own type: sums and products (device/complex.cuh's
  // arithmetic), max and min in the real-then-imaginary order, and
  // logcumsumexp as the CPU's.
  if (in == complex64 || out == complex64) return in == out;
  if (!gpu_supports(in) || !gpu_supports(out)) return false;
  if (t == Scan::Sum || t == Scan::Prod) {
    return in == out || ((in == bool_ || is_integral(in)) && is_integral(out) &&
                         out.size >= 4);
  }
  if (t == Scan::LogAddExp) return in == out && is_floating_point(in);
  return in == out;
}

/** Each piece of a line scanned in pieces gets at least this many tiles. */
constexpr int64_t min_chunk_tiles = 4;

/** How many pieces a long line is cut into: as many as make one full wave
 *  of the GPU with the pieces' blocks (fewer pieces leave SMs idle; more
 *  make a second, partial wave), or 1 when one block per line already
 *  fills half the GPU or the lines are short. On an H200, cumsum of 16M
 *  float32 took 71 us in one wave (660 blocks of 5 per SM) against 75-76
 *  us with 1024 or 2048 blocks. */
int64_t scan_chunk_count(const AxisLines& l, int64_t wave, Tile tile) {
  if (l.lines >= wave / 2) return 1;
  int64_t by_length = l.n / (min_chunk_tiles * tile.size());
  return std::max<int64_t>(1, std::min(by_length, wave / l.lines));
}

/** The scan of long lines in pieces, `chunks` per line: the pieces'
 *  totals, then each piece from the totals before it. */
void scan_in_chunks(const Scan& p, const array& in, array& out,
                    AxisLines l, int64_t chunks, Tile long_tile,
                    CUfunction pieces_kernel, const Stream& s) {
  int64_t tile = long_tile.size();
  int64_t chunk = (l.n + chunks - 1) / chunks;
  chunk = (chunk + tile - 1) / tile * tile;
  chunks = (l.n + chunk - 1) / chunk;
  const char* op = scan_op(p.type());
  CUfunction totals_kernel =
      get_kernel(scan_kernel(op, in.dtype(), out.dtype(), 't'));
  // Room for the widest compute type (8 bytes) per piece.
  Scratch totals(static_cast<size_t>(l.lines * chunks) * 8, s);
  void* src = device_ptr(in, s);
  void* dst = out.raw_data_ptr();
  bool inclusive = p.inclusive(), reverse = p.reverse();
  int64_t blocks = l.lines * chunks;
  void* total_args[] = {&src,  &totals.ptr,  &chunks,  &chunk,
                        &l.n, &l.in_stride, &reverse, &l.starts};
  int threads = long_tile.threads;
  launch_blocks(totals_kernel, blocks, threads, 1, total_args, s.index);
  void* scan_args[] = {&src,     &dst,         &totals.ptr, &chunks,
                       &chunk,   &l.n,         &l.inner,    &l.in_stride,
                       &inclusive, &reverse,   &l.starts};
  launch_blocks(pieces_kernel, blocks, threads, 1, scan_args, s.index);
}

bool scan(const Scan& p, const array& in, array& out, const Stream& s) {
  if (!scans_on_gpu(p.type(), in.dtype(), out.dtype())) return false;
  if (in.size() == 0) {
    set_device_output(out, s);
    return true;
  }
  AxisLines l;
  if (!axis_lines(in, p.axis(), l)) return false;
  set_device_output(out, s);
  char pattern = l.inner > 1 && l.lines >= column_min_lines ? 'c'
                 : l.n <= short_scan_tile.size()            ? 's'
                                                            : 'r';
  Tile long_tile = long_scan_tile(in.itemsize());
  // At most 2048 threads per SM: lines that fill half of that many blocks
  // need no pieces, and their kernel is not looked up (or compiled).
  int64_t most_blocks =
      int64_t(device_info().sm_count) * (2048 / long_tile.threads);
  if (pattern == 'r' && 2 * l.lines < most_blocks &&
      l.n >= 2 * min_chunk_tiles * long_tile.size()) {
    CUfunction pieces = get_kernel(
        scan_kernel(scan_op(p.type()), in.dtype(), out.dtype(), 'k'));
    int64_t wave = int64_t(device_info().sm_count) *
                   resident_blocks(pieces, long_tile.threads);
    if (int64_t chunks = scan_chunk_count(l, wave, long_tile); chunks > 1) {
      scan_in_chunks(p, in, out, l, chunks, long_tile, pieces, s);
      return true;
    }
  }
  CUfunction f = get_kernel(
      scan_kernel(scan_op(p.type()), in.dtype(), out.dtype(), pattern));
  void* src = device_ptr(in, s);
  void* dst = out.raw_data_ptr();
  bool inclusive = p.inclusive(), reverse = p.reverse();
  void* args[] = {&src,         &dst,       &l.lines, &l.n,     &l.inner,
                  &l.in_stride, &inclusive, &reverse, &l.starts};
  if (pattern == 'c') {
    launch(f, l.lines, 1, args, s.index);
  } else {
    Tile t = pattern == 's' ? short_scan_tile : long_tile;
    launch_blocks(f, l.lines, t.threads, args, s.index);
  }
  return true;
}

} // namespace

JitKernel scan_kernel(const std::string& op, Dtype in, Dtype out,
                      char pattern) {
  JitKernel k{scan_name(pattern, op, in, out), scan_source,
              scan_expression(pattern, op, in, out)};
  // One module per group: the per-line patterns, and the two passes of
  // the scan in pieces.
  std::string group = pattern == 't' || pattern == 'k' ? "tk" : "src";
  for (char other : group) {
    if (other == pattern) continue;
    k.siblings.emplace_back(scan_name(other, op, in, out),
                            scan_expression(other, op, in, out));
  }
  return k;
}

} // namespace kiln::cuda

namespace kiln {

void Scan::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::scan(*this, inputs[0], out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

} // namespace kiln
