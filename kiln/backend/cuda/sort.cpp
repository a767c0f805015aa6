// Sorts on the GPU (device/sort.cuh): one block per line, for lines of up to
// the largest sort tile. Partitions are full sorts, which satisfy their
// contract. Longer lines, complex64 and inputs whose other axes do not
// collapse to max_ndim dimensions run on the CPU. searchsorted: one thread
// per value.
#include "kiln/primitives/sort.h"
#include "kiln/backend/cuda/axis_kernels.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"

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

bool sort(const AxisSortPrimitive& p, bool arg, const array& in, array& out,
          const Stream& s) {
  if (!gpu_supports(in.dtype())) return false;
  if (in.size() == 0) {
    set_device_output(out, s);
    return true;
  }
  int64_t n = in.shape(p.axis());
  size_t tile = 0;
  while (tile < sort_tiles.size() && sort_tiles[tile].size() < n) ++tile;
  if (tile == sort_tiles.size()) return false;
  AxisLines l;
  if (!axis_lines(in, p.axis(), l)) return false;
  set_device_output(out, s);
  CUfunction f = get_kernel(sort_kernel(in.dtype(), arg, tile));
  void* src = device_ptr(in, s);
  void* dst = out.raw_data_ptr();
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
