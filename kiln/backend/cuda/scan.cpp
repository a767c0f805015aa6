// Scans on the GPU (device/scan.cuh). The output is row-major, as on the
// CPU; dtype pairs the CPU does not scan, complex64 and inputs whose other
// axes do not collapse to max_ndim dimensions run on the CPU.
#include <limits>

#include "kiln/backend/cuda/axis_kernels.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/backend/cuda/utils.h"
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
  Tile t = pattern == 's'   ? short_scan_tile
           : pattern == 'b' ? lookback_scan_tile
                            : long_scan_tile;
  std::string kernel = pattern == 'b' ? "scan_lookback" : "scan_lines";
  return "kiln::cuda::" + kernel + "<" + args + ", " +
         std::to_string(t.threads) + ", " + std::to_string(t.items) + ">";
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
  if (!gpu_supports(in) || !gpu_supports(out)) return false;
  if (t == Scan::Sum || t == Scan::Prod) {
    return in == out || ((in == bool_ || is_integral(in)) && is_integral(out) &&
                         out.size >= 4);
  }
  if (t == Scan::LogAddExp) return in == out && is_floating_point(in);
  return in == out;
}

/** Lines at least this many tiles long, too few to fill the GPU with a
 *  block each, are scanned in one pass by tiles across blocks
 *  (scan_lookback). */
constexpr int64_t lookback_max_lines = 512;
constexpr int64_t lookback_min_tiles = 4;

bool scans_by_tiles(const AxisLines& l) {
  int64_t tiles_per_line =
      (l.n + lookback_scan_tile.size() - 1) / lookback_scan_tile.size();
  return l.lines < lookback_max_lines &&
         tiles_per_line >= lookback_min_tiles &&
         l.lines * tiles_per_line < std::numeric_limits<int>::max();
}

/** The single-pass scan of long lines, its state (the tile counter and
 *  each tile's flag and value slots) zeroed first. */
void scan_by_tiles(const Scan& p, const array& in, array& out, AxisLines l,
                   const Stream& s) {
  int64_t tiles_per_line =
      (l.n + lookback_scan_tile.size() - 1) / lookback_scan_tile.size();
  int64_t tiles = l.lines * tiles_per_line;
  CUfunction f = get_kernel(
      scan_kernel(scan_op(p.type()), in.dtype(), out.dtype(), 'b'));
  size_t state_bytes = lookback_state_bytes(tiles);
  Scratch state(state_bytes, s);
  KILN_CHECK_CUDA(
      cudaMemsetAsync(state.ptr, 0, state_bytes, cuda_stream(s)));
  void* src = device_ptr(in, s);
  void* dst = out.raw_data_ptr();
  bool inclusive = p.inclusive(), reverse = p.reverse();
  void* args[] = {&src,         &dst,           &state.ptr, &tiles,
                  &tiles_per_line, &l.n,        &l.inner,   &l.in_stride,
                  &inclusive,   &reverse,       &l.starts};
  launch_blocks(f, tiles, lookback_scan_tile.threads, args, s.index);
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
  if (pattern == 'r' && scans_by_tiles(l)) {
    scan_by_tiles(p, in, out, l, s);
    return true;
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
    Tile t = pattern == 's' ? short_scan_tile : long_scan_tile;
    launch_blocks(f, l.lines, t.threads, args, s.index);
  }
  return true;
}

} // namespace

JitKernel scan_kernel(const std::string& op, Dtype in, Dtype out,
                      char pattern) {
  JitKernel k{scan_name(pattern, op, in, out), scan_source,
              scan_expression(pattern, op, in, out)};
  // One module for the per-line patterns; the single-pass scan of long
  // lines has its own.
  std::string group = pattern == 'b' ? "b" : "src";
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
