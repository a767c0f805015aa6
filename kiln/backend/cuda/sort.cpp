// Sorts on the GPU (device/sort.cuh): one block per line for lines of up to
// the largest sort tile; longer lines sorted tile by tile, then merged.
// Partitions are full sorts, which satisfy their contract. complex64 and
// inputs whose other axes do not collapse to max_ndim dimensions run on the
// CPU. searchsorted: one thread per value.
#include <climits>

#include "kiln/backend/cuda/allocator.h"
#include "kiln/backend/cuda/axis_kernels.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/primitives/sort.h"

namespace kiln::cuda {

namespace {

const char* sort_source = "#include \"kiln/backend/cuda/device/sort.cuh\"\n";

std::string sort_name(Dtype t, bool arg, size_t tile) {
  return "t" + std::to_string(sort_tiles[tile].size()) +
         (arg ? "ArgSort" : "Sort") + dtype_name(t);
}

std::string sort_expression(Dtype t, bool arg, size_t tile) {
  return "kiln::cuda::sort_lines<" + std::string(device_type(t)) + ", " +
         (arg ? "true" : "false") + ", " +
         std::to_string(sort_tiles[tile].threads) + ", " +
         std::to_string(sort_tiles[tile].items) + ">";
}

const char* key_type(Dtype t) {
  switch (t.size) {
    case 1: return "unsigned char";
    case 2: return "unsigned short";
    case 4: return "unsigned int";
    default: return "unsigned long long";
  }
}

std::string long_sort_name(Dtype t, bool arg, char stage) {
  return stage + std::string(arg ? "ArgSort" : "Sort") + dtype_name(t);
}

std::string long_sort_expression(Dtype t, bool arg, char stage) {
  std::string flag = arg ? "true" : "false";
  if (stage == 'r') {
    Tile tile = sort_tiles.back();
    return "kiln::cuda::sort_runs<" + std::string(device_type(t)) + ", " +
           flag + ", " + std::to_string(tile.threads) + ", " +
           std::to_string(tile.items) + ">";
  }
  if (stage == 'm') {
    return "kiln::cuda::merge_runs<" + std::string(key_type(t)) + ">";
  }
  return "kiln::cuda::write_sorted<" + std::string(device_type(t)) + ", " +
         flag + ">";
}

// Lines longer than the largest tile: sorted runs of one tile, merged in
// log2(n / tile) passes between two scratch buffers, then written out.
void sort_long_lines(Dtype t, bool arg, AxisLines& l, const void* src,
                     void* dst, const Stream& s) {
  CUfunction runs = get_kernel(long_sort_kernel(t, arg, 'r'));
  CUfunction merge = get_kernel(long_sort_kernel(t, arg, 'm'));
  CUfunction write = get_kernel(long_sort_kernel(t, arg, 'w'));
  int64_t count = l.lines * l.n;
  size_t key_bytes = static_cast<size_t>(count) * t.size;
  size_t index_bytes = static_cast<size_t>(count) * sizeof(uint32_t);
  Scratch keys[2] = {{key_bytes, s}, {key_bytes, s}};
  Scratch index[2] = {{index_bytes, s}, {index_bytes, s}};
  Tile tile = sort_tiles.back();
  int64_t tiles = (l.n + tile.size() - 1) / tile.size();
  void* runs_args[] = {&src, &keys[0].ptr, &index[0].ptr, &l.lines,
                       &l.n, &l.in_stride, &l.starts};
  launch_blocks(runs, l.lines * tiles, tile.threads, runs_args, s.index);
  int cur = 0;
  for (int64_t width = tile.size(); width < l.n; width *= 2, cur ^= 1) {
    void* merge_args[] = {&keys[cur].ptr,
                          &index[cur].ptr,
                          &keys[1 - cur].ptr,
                          &index[1 - cur].ptr,
                          &l.lines,
                          &l.n,
                          &width};
    launch(merge, count, 1, merge_args, s.index);
  }
  void* write_args[] = {&keys[cur].ptr, &index[cur].ptr, &dst, &l.lines,
                        &l.n,           &l.inner};
  launch(write, count, 1, write_args, s.index);
}

bool sort(const AxisSortPrimitive& p, bool arg, const array& in, array& out,
          const Stream& s) {
  if (!gpu_supports(in.dtype())) return false;
  if (in.size() == 0) {
    set_device_output(out, s);
    return true;
  }
  int64_t n = in.shape(p.axis());
  // argsort's positions are uint32, as on the CPU.
  if (n > static_cast<int64_t>(UINT32_MAX)) return false;
  AxisLines l;
  if (!axis_lines(in, p.axis(), l)) return false;
  size_t tile = 0;
  while (tile < sort_tiles.size() && sort_tiles[tile].size() < n) ++tile;
  set_device_output(out, s);
  void* src = device_ptr(in, s);
  void* dst = out.raw_data_ptr();
  if (tile == sort_tiles.size()) {
    sort_long_lines(in.dtype(), arg, l, src, dst, s);
    return true;
  }
  CUfunction f = get_kernel(sort_kernel(in.dtype(), arg, tile));
  void* args[] = {&src,     &dst,         &l.lines, &l.n,
                  &l.inner, &l.in_stride, &l.starts};
  launch_blocks(f, l.lines, sort_tiles[tile].threads, args, s.index);
  return true;
}

bool search_sorted(bool right, const array& seq, const array& values,
                   array& out, const Stream& s) {
  if (!gpu_supports(seq.dtype())) return false;
  Strided<2> layout;
  std::array<Strides, 2> strides{values.strides(),
                                 row_major_strides(out.shape())};
  if (!collapsed(values.shape(), strides, layout)) return false;
  set_device_output(out, s);
  int64_t count = static_cast<int64_t>(out.size());
  if (count == 0) return true;
  CUfunction f = get_kernel(search_sorted_kernel(seq.dtype()));
  // An empty sequence is never read (every answer is 0).
  void* seq_ptr = seq.size() ? device_ptr(seq, s) : nullptr;
  void* values_ptr = device_ptr(values, s);
  void* out_ptr = out.raw_data_ptr();
  int64_t n = seq.shape(0), seq_stride = seq.strides()[0];
  void* args[] = {&seq_ptr, &n,     &seq_stride, &values_ptr,
                  &out_ptr, &count, &right,      &layout};
  launch(f, count, 1, args, s.index);
  return true;
}

} // namespace

JitKernel search_sorted_kernel(Dtype t) {
  return {"gSearchSorted" + dtype_name(t), sort_source,
          "kiln::cuda::search_sorted<" + std::string(device_type(t)) + ">"};
}

JitKernel long_sort_kernel(Dtype t, bool arg, char stage) {
  JitKernel k{long_sort_name(t, arg, stage), sort_source,
              long_sort_expression(t, arg, stage)};
  for (char other : {'r', 'm', 'w'}) {
    if (other == stage) continue;
    k.siblings.emplace_back(long_sort_name(t, arg, other),
                            long_sort_expression(t, arg, other));
  }
  return k;
}

JitKernel sort_kernel(Dtype t, bool arg, size_t tile) {
  JitKernel k{sort_name(t, arg, tile), sort_source,
              sort_expression(t, arg, tile)};
  for (size_t other = 0; other < sort_tiles.size(); ++other) {
    if (other == tile) continue;
    k.siblings.emplace_back(sort_name(t, arg, other),
                            sort_expression(t, arg, other));
  }
  return k;
}

} // namespace kiln::cuda

namespace kiln {

// Partition and ArgPartition: a sort puts every element where the partition
// contract wants it (kth in place, nothing larger before, nothing smaller
// after).
#define KILN_GPU_SORT(Name, arg)                                      \
  void Name::eval_gpu(const std::vector<array>& inputs, array& out) { \
    if (!cuda::sort(*this, arg, inputs[0], out, stream())) {          \
      cuda::eval_on_cpu(*this, inputs, out);                          \
    }                                                                 \
  }
KILN_GPU_SORT(Sort, false)
KILN_GPU_SORT(Partition, false)
KILN_GPU_SORT(ArgSort, true)
KILN_GPU_SORT(ArgPartition, true)
#undef KILN_GPU_SORT

void SearchSorted::eval_gpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  if (!cuda::search_sorted(right_, inputs[0], inputs[1], outputs[0],
                           stream())) {
    cuda::eval_on_cpu(*this, inputs, outputs);
  }
}

} // namespace kiln
