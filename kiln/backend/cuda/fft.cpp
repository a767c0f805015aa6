// eval_gpu of the FFT primitive through cuFFT (cufft.h), one call for up
// to three axes over the whole batch of the others. The output is packed
// with the transformed axes innermost, in the primitive's order (row-major
// when they are the last axes; a permuted layout rather than a copy back
// otherwise, as PyTorch's):
// - Axes that follow one another in memory (consecutive, in increasing
//   order) are read where they are: with values after the axes the
//   transforms are interleaved (cuFFT's strides), one call per block of
//   the axes before them, while those are few.
// - Other axis sets take one copy that puts them innermost.
// The input is read where it lies when its layout is the one needed.
// cuFFT does not scale: a pass over the output does (irfft scales its
// spectra instead, while making them fit a real signal's: see
// device/fft.cuh). irfft over several axes runs the complex inverse first,
// then the complex-to-real transform with the real axis innermost, on its
// own copy (cuFFT's complex-to-real transform overwrites its input); along
// one axis with values after it, its output is row-major, interleaved as
// its input. Real transforms over several axes with few blocks of the
// others run the real axis apart from the complex ones (split_real below).
// More than three axes, or no cuFFT, run on the CPU.
#include "kiln/backend/cuda/fft_kernels.h"

#include <numeric>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cufft.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/core/layout.h"
#include "kiln/primitives/fft.h"

namespace kiln::cuda {

JitKernel fft_scale_kernel() {
  return {"vFftScalefloat32", "#include \"kiln/backend/cuda/device/fft.cuh\"\n",
          "kiln::cuda::fft_scale<float, " + std::to_string(fft_scale_width) +
              ">",
          {}};
}

JitKernel fft_spectra_kernel() {
  return {"vFftSpectrafloat32",
          "#include \"kiln/backend/cuda/device/fft.cuh\"\n",
          "kiln::cuda::fft_spectra<float>",
          {}};
}

namespace {

// At most this many calls run a transform where it lies (one per block of
// the axes before it); past that the input is copied to put it innermost.
constexpr int64_t max_blocks = 16;

int64_t product(const Shape& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= shape[i];
  return p;
}

// The axes of an ndim array outermost first: those not in `inner` in their
// order, then `inner` in its order.
std::vector<int> order_with_inner(int ndim, const std::vector<int>& inner) {
  std::vector<bool> is_inner(ndim, false);
  for (int a : inner) is_inner[a] = true;
  std::vector<int> order;
  for (int a = 0; a < ndim; ++a) {
    if (!is_inner[a]) order.push_back(a);
  }
  order.insert(order.end(), inner.begin(), inner.end());
  return order;
}

// Packed strides of `shape` laid out in `order` (outermost first).
Strides packed_strides(const Shape& shape, const std::vector<int>& order) {
  Strides st(shape.size());
  int64_t step = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    st[*it] = step;
    step *= shape[*it];
  }
  return st;
}

// cuFFT takes pointers aligned to a complex value (8 bytes), real ones too.
constexpr uintptr_t fft_alignment = 8;

bool is_packed(const array& x, Dtype dt, const std::vector<int>& order) {
  return x.dtype() == dt && x.data_size() == x.size() &&
         x.strides() == packed_strides(x.shape(), order) &&
         x.offset() % fft_alignment == 0;
}

// Gives `a` a fresh device buffer packed in `order`.
void set_packed_output(array& a, const std::vector<int>& order,
                       const Stream& s) {
  Strides st = packed_strides(a.shape(), order);
  Layout l = layout_of(a.shape(), st);
  set_device_output(a, l.data_size, std::move(st), l.flags, s);
}

// x as a device array of dtype dt packed in `order`: x itself when it is
// laid out so, else a copy.
array packed(const array& x, Dtype dt, const std::vector<int>& order,
             const Stream& s) {
  if (is_packed(x, dt, order)) return x;
  array p = array::uninitialized(x.shape(), dt);
  set_packed_output(p, order, s);
  copy_into(x, p, p.strides(), 0, s);
  return p;
}

// Transforms `axes` (their sizes from real_shape: the real side's for r2c
// and c2r) from in to out, both packed as the caller chose: row-major with
// the transforms interleaved (`interleaved`: one call per block of the
// axes before them), or with the axes innermost. With `packed_output` an
// interleaved input gives an output with the axes innermost (each block's
// transforms one after another where its interleaved ones would be):
// cuFFT writes whole transforms faster than interleaved ones (67 against
// 104 us along axis 0 of 4096 x 2049 complex values), as PyTorch's layout.
void transform(cufft::Kind kind, const Shape& real_shape,
               const std::vector<int>& axes, bool interleaved, void* in,
               void* out, bool inverse, const Stream& s,
               bool packed_output = false) {
  cufft::Layout l{kind, static_cast<int>(axes.size()), {1, 1, 1}, 1, 1,
                  packed_output};
  int64_t points = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    l.dims[i] = real_shape[axes[i]];
    points *= l.dims[i];
  }
  if (!interleaved) {
    l.batch = product(real_shape, 0, real_shape.size()) / points;
    cufft::execute(l, in, out, inverse, s);
    return;
  }
  int64_t last = l.dims[l.rank - 1];
  int64_t half = points / last * (last / 2 + 1);
  int64_t in_step = kind == cufft::Kind::r2c   ? points * 4
                    : kind == cufft::Kind::c2r ? half * 8
                                               : points * 8;
  int64_t out_step = kind == cufft::Kind::r2c   ? half * 8
                     : kind == cufft::Kind::c2r ? points * 4
                                                : points * 8;
  l.batch = l.stride =
      product(real_shape, axes.back() + 1, real_shape.size());
  in_step *= l.stride;
  out_step *= l.stride;
  int64_t blocks = product(real_shape, 0, axes.front());
  for (int64_t b = 0; b < blocks; ++b) {
    cufft::execute(l, static_cast<char*>(in) + b * in_step,
                   static_cast<char*>(out) + b * out_step, inverse, s);
  }
}

// Transforms `axes` of a (complex64, packed in `order`, where the axes sit
// one after another), interleaved over the values after them, one call per
// block of the axes before them: into `out` with the axes innermost
// (packed_output above), or in place when out is a.
void transform_laid_out(array& a, const std::vector<int>& order,
                        const std::vector<int>& axes, bool inverse,
                        array& out, const Stream& s) {
  Shape laid_out;
  std::vector<int> position(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    laid_out.push_back(a.shape(order[i]));
    position[order[i]] = static_cast<int>(i);
  }
  std::vector<int> laid_axes;
  for (int ax : axes) laid_axes.push_back(position[ax]);
  transform(cufft::Kind::c2c, laid_out, laid_axes, true, a.raw_data_ptr(),
            out.raw_data_ptr(), inverse, s, &out != &a);
}

void scale_in_place(array& a, float scale, const Stream& s) {
  if (scale == 1.0f) return;
  int64_t n = static_cast<int64_t>(a.data_size()) *
              (a.dtype() == complex64 ? 2 : 1);
  void* p = a.raw_data_ptr();
  void* args[] = {&p, &n, &scale};
  launch(get_kernel(fft_scale_kernel()), n, fft_scale_width, args, s.index);
}

// spectra = src * scale, made fit for a real signal of n_points along an
// axis with `inner` values after it (device/fft.cuh).
void make_spectra(void* src, array& spectra, int64_t n_points, int64_t inner,
                  float scale, const Stream& s) {
  int64_t n = static_cast<int64_t>(spectra.size());
  int64_t m = n_points / 2 + 1;
  int even = n_points % 2 == 0;
  void* out = spectra.raw_data_ptr();
  void* args[] = {&src, &out, &n, &m, &inner, &even, &scale};
  launch(get_kernel(fft_spectra_kernel()), n, 1, args, s.index);
}

} // namespace

} // namespace kiln::cuda

namespace kiln {

// Known from the primitive alone, so fft's ops place such transforms on the
// CPU as they build the graph.
std::string FFT::gpu_declines(const std::vector<array>&) const {
  if (!cuda::cufft::available()) return "an FFT without cuFFT (not found)";
  if (axes_.empty()) return "an FFT over no axes";
  if (axes_.size() > 3) {
    return "an FFT over " + std::to_string(axes_.size()) +
           " axes (cuFFT's plans take at most 3)";
  }
  return {};
}

void FFT::eval_gpu(const std::vector<array>& inputs, array& out) {
  using namespace cuda;
  using cufft::Kind;
  const array& in = inputs[0];
  const Stream& s = stream();
  int ndim = static_cast<int>(in.ndim());
  bool irfft = real_ && inverse_;
  if (!gpu_declines(inputs).empty()) {
    eval_on_cpu(*this, inputs, out);
    return;
  }
  bool consecutive = true;
  for (size_t i = 1; i < axes_.size(); ++i) {
    consecutive &= axes_[i] == axes_[i - 1] + 1;
  }
  // Interleaved blocks of real values start on a complex value's alignment.
  const Shape& real_shape = irfft ? out.shape() : in.shape();
  int64_t blocks = product(in.shape(), 0, axes_.front());
  bool aligned_blocks =
      !real_ || blocks == 1 ||
      product(real_shape, axes_.front(), ndim) % 2 == 0;
  bool interleaved = consecutive &&
                     product(in.shape(), axes_.back() + 1, ndim) > 1 &&
                     blocks <= max_blocks && aligned_blocks &&
                     !(irfft && axes_.size() > 1);
  std::vector<int> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  if (!interleaved) order = order_with_inner(ndim, axes_);
  bool fits = can_copy_into(in, real_ && !inverse_ ? float32 : complex64,
                            packed_strides(in.shape(), order)) &&
              (!irfft || in.shape(axes_.back()) == n_last_ / 2 + 1);
  if (!fits) {
    eval_on_cpu(*this, inputs, out);
    return;
  }
  if (out.size() == 0) {
    set_device_output(out, s);
    return;
  }
  float scale = static_cast<float>(this->scale(in));
  int real_axis = axes_.back();
  std::vector<int> complex_axes(axes_.begin(), axes_.end() - 1);
  // Real transforms over several axes, the real axis innermost and few
  // blocks of the other axes (one call each), run as PyTorch's do: the
  // real one along the real axis on its own, and the complex transform over
  // the other axes, interleaved (in place for irfft). cuFFT's multi-axis
  // real-to-complex plans took 127 us for 4096 x 4096 where this takes 106.
  int64_t points = 1;
  for (int ax : axes_) points *= real_shape[ax];
  bool split_real = real_ && !complex_axes.empty() && !interleaved &&
                    product(real_shape, 0, ndim) / points <= max_blocks;
  if (!irfft) {
    array x = packed(in, real_ ? float32 : complex64, order, s);
    if (split_real) {
      // The output with the complex axes innermost, the real axis next.
      array half = array::uninitialized(out.shape(), complex64);
      set_packed_output(half, order, s);
      transform(Kind::r2c, in.shape(), {real_axis}, false, device_ptr(x, s),
                half.raw_data_ptr(), false, s);
      std::vector<int> out_inner = complex_axes;
      out_inner.insert(out_inner.begin(), real_axis);
      set_packed_output(out, order_with_inner(ndim, out_inner), s);
      transform_laid_out(half, order, complex_axes, false, out, s);
    } else {
      set_packed_output(out, order_with_inner(ndim, axes_), s);
      transform(real_ ? Kind::r2c : Kind::c2c, in.shape(), axes_, interleaved,
                device_ptr(x, s), out.raw_data_ptr(), inverse_, s,
                interleaved);
    }
    scale_in_place(out, scale, s);
    return;
  }
  // irfft: spectra, packed as the output, is what the complex-to-real
  // transform reads and overwrites.
  array spectra = array::uninitialized(in.shape(), complex64);
  set_packed_output(spectra, order, s);
  void* src = spectra.raw_data_ptr();
  if (axes_.size() == 1 && is_packed(in, complex64, order)) {
    src = device_ptr(in, s);
  } else if (axes_.size() == 1 || split_real) {
    copy_into(in, spectra, spectra.strides(), 0, s);
    if (split_real) {
      transform_laid_out(spectra, order, complex_axes, true, spectra, s);
    }
  } else {
    // The complex inverse along the other axes, with those innermost.
    std::vector<int> y_inner = complex_axes;
    y_inner.insert(y_inner.begin(), real_axis);
    array y = array::uninitialized(in.shape(), complex64);
    set_packed_output(y, order_with_inner(ndim, y_inner), s);
    copy_into(in, y, y.strides(), 0, s);
    transform(Kind::c2c, in.shape(), complex_axes, false, y.raw_data_ptr(),
              y.raw_data_ptr(), true, s);
    copy_into(y, spectra, spectra.strides(), 0, s);
  }
  make_spectra(src, spectra, n_last_,
               interleaved ? product(in.shape(), real_axis + 1, ndim) : 1,
               scale, s);
  set_packed_output(out, order, s);
  transform(Kind::c2r, out.shape(), {real_axis}, interleaved,
            spectra.raw_data_ptr(), out.raw_data_ptr(), false, s);
}

} // namespace kiln
