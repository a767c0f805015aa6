// Sorts on the GPU (device/sort.cuh): one block per line, for lines of up to
// the largest sort tile. Partitions are full sorts, which satisfy their
// contract. Longer lines, complex64 and inputs whose other axes do not
// collapse to max_ndim dimensions run on the CPU.
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
  void* args[] = {&src, &dst, &l.lines, &l.n, &l.inner, &l.in_stride,
                  &l.starts};
  launch_blocks(f, l.lines, sort_tiles[tile].threads, args, s.index);
  return true;
}

} // namespace

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
#define KILN_GPU_SORT(Name, arg)                                       \
  void Name::eval_gpu(const std::vector<array>& inputs, array& out) {  \
    if (!cuda::sort(*this, arg, inputs[0], out, stream())) {           \
      cuda::eval_on_cpu(*this, inputs, out);                           \
    }                                                                  \
  }
KILN_GPU_SORT(Sort, false)
KILN_GPU_SORT(Partition, false)
KILN_GPU_SORT(ArgSort, true)
KILN_GPU_SORT(ArgPartition, true)
#undef KILN_GPU_SORT

} // namespace kiln
