// eval_gpu of Reduce, ArgReduce and NumberOfElements. The input splits into
// kept and reduced dimensions (backend/common/reduce_layout.h, the reduced
// ones ordered by stride so transposed regions collapse); then the
// innermost strides pick the kernel (device/reduce.cuh):
//  - the reduced run is contiguous: row_reduce, a warp or a block per
//    output, split over blocks with a second pass when the outputs are too
//    few to fill the device (the all-reduce is this case);
//  - else the kept run is contiguous: col_reduce, threads across outputs;
//  - else whichever walks the smaller stride.
// Outputs are row-major, as on the CPU. Dtypes or ranks the kernels lack
// (complex64 max and min: an error there) run on the CPU.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <stdexcept>

#include "kiln/backend/common/reduce_layout.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/reduce_kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/primitives/reduction.h"

namespace kiln::cuda {

namespace {

constexpr int block_threads = 256;
// Reductions of up to this many elements per output get a warp each.
constexpr int64_t warp_limit = 1024;
// Partials per output at most; a second pass reduces them.
constexpr int64_t max_splits = 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Enough 256-thread blocks for full waves (8 resident per SM), and the most
// a grid-stride kernel is launched with.
int64_t fill_blocks() { return int64_t(device_info().sm_count) * 8; }
int64_t max_blocks() { return int64_t(device_info().sm_count) * 64; }

const char* op_name(Reduce::Type t) {
  switch (t) {
    case Reduce::And: return "And";
    case Reduce::Or: return "Or";
    case Reduce::Sum: return "Sum";
    case Reduce::Prod: return "Prod";
    case Reduce::Max: return "Max";
    case Reduce::Min: return "Min";
  }
  return "";
}

Shape outer_dims(const Shape& s) { return Shape(s.begin(), s.end() - 1); }
std::array<Strides, 1> outer_dims(const std::array<Strides, 1>& st) {
  return {Strides(st[0].begin(), st[0].end() - 1)};
}

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int x : s) n *= x;
  return n;
}

/** A fresh device array of n elements for partials. It is freed when this
 *  returns and the stream's later work is ordered after its readers. */
array partials(int64_t n, Dtype dt, const Stream& s) {
  array p = array::uninitialized(Shape{static_cast<int32_t>(n)}, dt);
  set_device_output(p, s);
  return p;
}

struct RowArgs {
  int64_t n_out, splits, chunk, len, stride, n_outer;
  Strided<1> kept, outer;
};

void row_pass(const std::string& op, Dtype in_dt, Dtype out_dt,
              const void* in, void* out, RowArgs a, bool large, int stream) {
  bool warp = a.splits == 1 && a.len * a.n_outer <= warp_limit;
  CUfunction f =
      get_kernel(reduce_kernel(warp ? 'w' : 'r', op, in_dt, out_dt, large));
  int64_t items = a.n_out * a.splits;
  int64_t blocks = warp ? ceil_div(items, block_threads / 32) : items;
  void* params[] = {&in,     &out,      &items,     &a.splits, &a.chunk,
                    &a.len, &a.stride, &a.n_outer, &a.kept,   &a.outer};
  launch_blocks(f, std::min(blocks, max_blocks()), block_threads, 1, params,
                stream);
}

/** The reduced run is contiguous, or walked with a stride by one warp or
 *  block per output. */
void row_reduce(const std::string& op, const array& in, array& out,
                const detail::ReduceLayout& l, bool large, const Stream& s) {
  RowArgs a{};
  a.n_out = static_cast<int64_t>(out.size());
  a.len = l.reduced_shape.back();
  a.stride = l.reduced_strides[0].back();
  Shape outer = outer_dims(l.reduced_shape);
  a.n_outer = product(outer);
  to_strided(l.kept_shape, l.kept_strides, a.kept);
  to_strided(outer, outer_dims(l.reduced_strides), a.outer);
  a.splits = 1;
  a.chunk = a.len;
  int vec = 16 / in.itemsize();
  if (a.len * a.n_outer > warp_limit && a.n_out < fill_blocks()) {
    // Each split reads at least 4 vectors per thread.
    a.splits = std::min({ceil_div(fill_blocks(), a.n_out),
                         ceil_div(a.len, block_threads * vec * 4), max_splits});
    a.splits = std::max<int64_t>(a.splits, 1);
    a.chunk = ceil_div(ceil_div(a.len, a.splits), vec) * vec;
    a.splits = ceil_div(a.len, a.chunk);
  }
  // An empty input reads nothing: every output is the identity.
  const void* src = in.size() == 0 ? nullptr : device_ptr(in, s);
  if (a.splits == 1) {
    row_pass(op, in.dtype(), out.dtype(), src, out.raw_data_ptr(), a, large,
             s.index);
    return;
  }
  Dtype acc = reduce_acc_dtype(op, in.dtype(), out.dtype());
  array part = partials(a.n_out * a.splits, acc, s);
  row_pass(op, in.dtype(), acc, src, part.raw_data_ptr(), a, large, s.index);
  // Output o's partials are the contiguous run [o * splits, (o + 1) * splits).
  RowArgs b{};
  b.n_out = a.n_out;
  b.splits = 1;
  b.len = b.chunk = a.splits;
  b.stride = 1;
  b.n_outer = 1;
  to_strided(Shape{static_cast<int32_t>(a.n_out)},
             std::array<Strides, 1>{Strides{a.splits}}, b.kept);
  b.outer.ndim = 0;
  row_pass(op, acc, out.dtype(), part.raw_data_ptr(), out.raw_data_ptr(), b,
           false, s.index);
}

struct ColArgs {
  int64_t n_krows, k_len, k_stride, tiles, splits, chunk, n_red, len, stride;
  Strided<1> kept_outer, outer;
};

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// V columns per thread (1, or col_vec_width with vector loads).
void col_pass(const std::string& op, Dtype in_dt, Dtype out_dt,
              const void* in, void* out, ColArgs a, int v, bool large,
              int stream) {
  int bx =
      static_cast<int>(std::min<int64_t>(32, next_pow2(ceil_div(a.k_len, v))));
  int by = block_threads / bx;
  a.tiles = ceil_div(a.k_len, int64_t(bx) * v);
  CUfunction f = get_kernel(
      reduce_kernel(v > 1 ? 'C' : 'c', op, in_dt, out_dt, large));
  void* params[] = {&in,      &out,     &a.n_krows, &a.k_len,
                    &a.k_stride, &a.tiles, &a.splits, &a.chunk,
                    &a.n_red, &a.len,   &a.stride,  &a.kept_outer,
                    &a.outer};
  int64_t blocks = a.n_krows * a.tiles * a.splits;
  launch_blocks(f, std::min(blocks, max_blocks()), bx, by, params, stream);
}

// The columns per thread the "C" kernel may take for a: a contiguous kept
// run and every row it reads starting on a 16-byte boundary (base, reduced
// and kept-outer strides multiples of the vector), and at least one whole
// vector of columns; else 1.
int col_width(const ColArgs& a, const void* base, Dtype dt) {
  int v = col_vec_width(dt);
  bool fits = a.k_stride == 1 && a.k_len >= v &&
              reinterpret_cast<uintptr_t>(base) % (v * dt.size) == 0 &&
              a.stride % v == 0;
  for (int d = 0; fits && d < a.kept_outer.ndim; ++d) {
    fits = a.kept_outer.strides[0][d] % v == 0;
  }
  for (int d = 0; fits && d < a.outer.ndim; ++d) {
    fits = a.outer.strides[0][d] % v == 0;
  }
  return fits ? v : 1;
}

/** Threads across the kept inner run, the reduction down the block. */
void col_reduce(const std::string& op, const array& in, array& out,
                const detail::ReduceLayout& l, bool large, const Stream& s) {
  ColArgs a{};
  a.k_len = l.kept_shape.back();
  a.k_stride = l.kept_strides[0].back();
  Shape kept_outer = outer_dims(l.kept_shape);
  a.n_krows = product(kept_outer);
  to_strided(kept_outer, outer_dims(l.kept_strides), a.kept_outer);
  a.len = l.reduced_shape.back();
  a.stride = l.reduced_strides[0].back();
  Shape outer = outer_dims(l.reduced_shape);
  to_strided(outer, outer_dims(l.reduced_strides), a.outer);
  a.n_red = a.len * product(outer);
  const void* src = device_ptr(in, s);
  int v = col_width(a, src, in.dtype());
  int bx =
      static_cast<int>(std::min<int64_t>(32, next_pow2(ceil_div(a.k_len, v))));
  int by = block_threads / bx;
  int64_t items = a.n_krows * ceil_div(a.k_len, int64_t(bx) * v);
  a.splits = 1;
  // Each split gives every thread at least 16 elements.
  if (items < fill_blocks() && a.n_red > by * 16) {
    a.splits = std::min({ceil_div(fill_blocks(), items),
                         ceil_div(a.n_red, by * 16), max_splits});
  }
  a.chunk = ceil_div(a.n_red, a.splits);
  a.splits = ceil_div(a.n_red, a.chunk);
  if (a.splits == 1) {
    col_pass(op, in.dtype(), out.dtype(), src, out.raw_data_ptr(), a, v,
             large, s.index);
    return;
  }
  int64_t n_out = static_cast<int64_t>(out.size());
  Dtype acc = reduce_acc_dtype(op, in.dtype(), out.dtype());
  array part = partials(n_out * a.splits, acc, s);
  col_pass(op, in.dtype(), acc, src, part.raw_data_ptr(), a, v, large,
           s.index);
  // Partials of split c are the row [c * n_out, (c + 1) * n_out): a second
  // column reduction down the splits.
  ColArgs b{};
  b.n_krows = 1;
  b.k_len = n_out;
  b.k_stride = 1;
  b.splits = 1;
  b.n_red = b.len = b.chunk = a.splits;
  b.stride = n_out;
  b.kept_outer.ndim = 0;
  b.outer.ndim = 0;
  col_pass(op, acc, out.dtype(), part.raw_data_ptr(), out.raw_data_ptr(), b,
           col_width(b, part.raw_data_ptr(), acc), false, s.index);
}

// complex64 has sums, products and and/or here (max and min of complex
// values are the CPU's error).
bool reduces_on_gpu(Reduce::Type type, Dtype dt) {
  return gpu_supports(dt) ||
         (dt == complex64 && type != Reduce::Max && type != Reduce::Min);
}

bool reduce(Reduce::Type type, const std::vector<int>& axes, const array& in,
            array& out, const Stream& s) {
  if (!reduces_on_gpu(type, in.dtype()) || !reduces_on_gpu(type, out.dtype())) {
    return false;
  }
  detail::ReduceLayout l = detail::reduce_layout(in, axes, true);
  if (l.kept_shape.size() > static_cast<size_t>(max_ndim) ||
      l.reduced_shape.size() > static_cast<size_t>(max_ndim)) {
    return false;
  }
  set_device_output(out, s);
  if (out.size() == 0) return true;
  bool large = in.size() > UINT32_MAX;
  int64_t r_stride = std::llabs(l.reduced_strides[0].back());
  int64_t k_stride = std::llabs(l.kept_strides[0].back());
  bool empty = in.size() == 0; // every output is the identity
  bool rows = empty || r_stride == 1 ||
              (k_stride != 1 && r_stride <= k_stride);
  std::string op = op_name(type);
  if (rows) {
    row_reduce(op, in, out, l, large, s);
  } else {
    col_reduce(op, in, out, l, large, s);
  }
  return true;
}

bool arg_reduce(ArgReduce::Type type, int axis, const array& in, array& out,
                const Stream& s) {
  if (!gpu_supports(in.dtype())) return false;
  // The other dimensions, collapsed, in the output's row-major order.
  Shape kept = in.shape();
  kept[axis] = 1;
  std::array<Strides, 1> st{in.strides()};
  st[0][axis] = 0;
  Strided<1> layout;
  if (!collapsed(kept, st, layout)) return false;
  set_device_output(out, s);
  int64_t n_out = static_cast<int64_t>(out.size());
  if (n_out == 0) return true;
  int64_t len = in.shape(axis), stride = in.strides()[axis];
  // A thread per output pays off only with many outputs along a strided
  // axis; otherwise a warp or block reads each output's run.
  char shape = stride != 1 && n_out >= fill_blocks() * 8 ? 'c'
               : len <= warp_limit                       ? 'w'
                                                         : 'r';
  int64_t blocks = shape == 'c'   ? ceil_div(n_out, block_threads)
                   : shape == 'w' ? ceil_div(n_out, block_threads / 32)
                                  : n_out;
  const char* op = type == ArgReduce::ArgMax ? "ArgMax" : "ArgMin";
  CUfunction f = get_kernel(
      arg_reduce_kernel(shape, op, in.dtype(), in.size() > UINT32_MAX));
  const void* src = device_ptr(in, s);
  void* dst = out.raw_data_ptr();
  void* params[] = {&src, &dst, &n_out, &len, &stride, &layout};
  launch_blocks(f, std::min(blocks, max_blocks()), block_threads, 1, params,
                s.index);
  return true;
}

} // namespace

} // namespace kiln::cuda

namespace kiln {

void Reduce::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::reduce(type_, axes_, inputs[0], out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void ArgReduce::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::arg_reduce(type_, axis_, inputs[0], out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

// The count comes from the input's shape alone: no data is read, and a tiny
// kernel stores it so nothing waits for the host.
void NumberOfElements::eval_gpu(const std::vector<array>& inputs,
                                array& out) {
  // mean and var count complex values in float32 and cast the count
  // (ops/reduction.cpp).
  if (!cuda::gpu_supports(out.dtype())) {
    throw std::logic_error("[NumberOfElements] no GPU kernel for a " +
                           dtype_name(out.dtype()) + " count.");
  }
  cuda::set_device_output(out, stream());
  double n = count(inputs[0].shape());
  void* dst = out.raw_data_ptr();
  void* params[] = {&dst, &n};
  CUfunction f = cuda::get_kernel(cuda::number_of_elements_kernel(out.dtype()));
  cuda::launch_blocks(f, 1, 1, 1, params, stream().index);
}

} // namespace kiln
