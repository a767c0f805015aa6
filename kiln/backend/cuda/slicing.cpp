// eval_gpu of the slicing primitives that write: the updates and
// Concatenate copy into strided views of a row-major output through the copy
// kernels; dynamic windows read their start on the device
// (device/slicing.cuh), so no value waits for the host.
#include "kiln/backend/cuda/slicing.h"

#include <climits>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/indexing.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/primitives/slicing.h"

namespace kiln::cuda {

namespace {

// Host twin of device/slicing.cuh's DynamicStart.
struct DynamicStart {
  int num_axes;
  int64_t start_stride;
  int64_t dim[max_ndim];
  int64_t window[max_ndim];
  int64_t stride[max_ndim];
};

// Start values as the kernel reads them: value k at k * start_stride of a
// 0-d or 1-d array (others are copied row-major first).
bool device_start(array& start, int64_t& stride, const Stream& s) {
  if (!is_integral(start.dtype())) return false;
  if (start.ndim() > 1 && !start.flags().row_contiguous) {
    auto t = array::uninitialized(start.shape(), start.dtype());
    if (!copy_row_major(start, t, s)) return false;
    start = t;
  }
  stride = start.ndim() == 1 ? start.strides()[0] : 1;
  return true;
}

// Copies in into out over `shape` (in walked with in_strides, out with
// out_strides); the start of the window along `axes` (of sizes dims and
// strides axis_strides, window window_shape) is read on the device and
// shifts in's offsets, or out's when into_out.
struct DynamicCopy {
  Shape shape;
  Strides in_strides, out_strides;
  std::vector<int> axes;
  Shape window_shape, dims;
  Strides axis_strides;
  bool into_out;
};

bool dynamic_copy(const array& in, array& out, array start,
                  const DynamicCopy& c, const Stream& s) {
  DynamicStart d{};
  if (c.axes.size() > static_cast<size_t>(max_ndim)) return false;
  if (!device_start(start, d.start_stride, s)) return false;
  Strided<2> l;
  if (!collapsed(c.shape, std::array<Strides, 2>{c.in_strides, c.out_strides},
                 l)) {
    return false;
  }
  d.num_axes = static_cast<int>(c.axes.size());
  for (size_t k = 0; k < c.axes.size(); ++k) {
    d.dim[k] = c.dims[c.axes[k]];
    d.window[k] = c.window_shape[c.axes[k]];
    d.stride[k] = c.axis_strides[c.axes[k]];
  }
  int64_t n = static_cast<int64_t>(shape_size(c.shape));
  if (n == 0) return true;
  bool same = in.dtype() == out.dtype();
  Dtype from = same ? raw_dtype(in.dtype()) : in.dtype();
  Dtype to = same ? raw_dtype(out.dtype()) : out.dtype();
  bool large = static_cast<uint64_t>(n) > UINT32_MAX;
  CUfunction f = get_kernel(
      dynamic_copy_kernel(from, to, start.dtype(), c.into_out, large));
  void* in_ptr = device_ptr(in, s);
  void* out_ptr = device_ptr(out, s);
  void* start_ptr = device_ptr(start, s);
  void* args[] = {&in_ptr, &out_ptr, &start_ptr, &n, &l, &d};
  launch(f, n, 1, args, s.index);
  return true;
}

} // namespace

JitKernel dynamic_copy_kernel(Dtype in, Dtype out, Dtype start,
                              bool into_out, bool large) {
  std::string name = into_out ? "gDynamicSliceUpdate" : "gDynamicSlice";
  name += dtype_name(in);
  if (out != in) name += "_" + dtype_name(out);
  name += "_" + dtype_name(start);
  if (large) name += "_i64";
  std::string expr = "kiln::cuda::dynamic_copy<";
  for (const char* t : {device_type(in), device_type(out), device_type(start),
                        large ? "long long" : "unsigned int"}) {
    expr += t;
    expr += ", ";
  }
  expr += into_out ? "true>" : "false>";
  return {name, "#include \"kiln/backend/cuda/device/slicing.cuh\"\n", expr,
          {}};
}

} // namespace kiln::cuda

namespace kiln {

// A start that lives on the host is read there and the window is a view,
// as on the CPU. A start made on the GPU is read by the copy kernel, so the
// window becomes a row-major copy instead of waiting for the GPU.
void DynamicSlice::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  const array& start = inputs[1];
  if (out.size() == 0 || !start.on_device()) {
    eval_cpu(inputs, out);
    return;
  }
  cuda::DynamicCopy c{out.shape(), in.strides(),
                      row_major_strides(out.shape()), axes_, slice_size_,
                      in.shape(), in.strides(), false};
  cuda::set_device_output(out, stream());
  if (!cuda::dynamic_copy(in, out, start, c, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void SliceUpdate::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& update = inputs[1];
  // The output is row-major (copy_or_donate makes it so).
  WindowPlace w = window_place(out.shape(), row_major_strides(out.shape()),
                               start_, stop_, strides_);
  if (!cuda::can_copy_into(update, out.dtype(), w.strides) ||
      !cuda::copy_or_donate(inputs[0], out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
    return;
  }
  if (update.size() == 0) return;
  cuda::copy_into(update, out, w.strides, w.offset, stream());
}

void DynamicSliceUpdate::eval_gpu(const std::vector<array>& inputs,
                                  array& out) {
  const array& update = inputs[1];
  Strides out_strides = row_major_strides(out.shape());
  cuda::Strided<2> l;
  // Equal dtypes move raw elements (complex64 too); others convert.
  bool dtypes = update.dtype() == out.dtype() ||
                (cuda::gpu_supports(update.dtype()) &&
                 cuda::gpu_supports(out.dtype()));
  bool fits =
      dtypes && is_integral(inputs[2].dtype()) &&
      axes_.size() <= cuda::max_ndim &&
      cuda::collapsed(update.shape(),
                      std::array<Strides, 2>{update.strides(), out_strides},
                      l);
  if (!fits || !cuda::copy_or_donate(inputs[0], out, stream()) ||
      !cuda::dynamic_copy(update, out, inputs[2],
                          {update.shape(), update.strides(), out_strides,
                           axes_, update.shape(), out.shape(), out_strides,
                           true},
                          stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void Concatenate::eval_gpu(const std::vector<array>& inputs, array& out) {
  Strides strides = row_major_strides(out.shape());
  for (const array& in : inputs) {
    if (!cuda::can_copy_into(in, out.dtype(), strides)) {
      cuda::eval_on_cpu(*this, inputs, out);
      return;
    }
  }
  cuda::set_device_output(out, stream());
  int64_t offset = 0;
  for (const array& in : inputs) {
    cuda::copy_into(in, out, strides, offset, stream());
    offset += in.shape(axis_) * strides[axis_];
  }
}

} // namespace kiln
