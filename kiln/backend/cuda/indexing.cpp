// eval_gpu of Gather, Scatter, GatherAxis and ScatterAxis: outputs are
// row-major (a scatter's starts as a copy of its input), index arrays are
// read on the device as they are (any integer dtype, any strides), and the
// kernels are compiled by NVRTC per variant (indexing.h). Layouts the
// kernels cannot walk (more than max_ndim dimensions after collapsing, more
// than max_ndim index arrays) run on the CPU.
#include "kiln/backend/cuda/indexing.h"

#include <climits>
#include <utility>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/backend/cuda/utils.h"

namespace kiln::cuda {

namespace {

const char* source = "#include \"kiln/backend/cuda/device/indexing.cuh\"\n";

std::string position_type(bool large) {
  return large ? "long long" : "unsigned int";
}
std::string suffix(Dtype dt, Dtype index, bool large) {
  return dtype_name(dt) + "_" + dtype_name(index) + (large ? "_i64" : "");
}
const char* flag(bool b) { return b ? "true" : "false"; }
char letter(bool contiguous) { return contiguous ? 'v' : 'g'; }

const char* functor(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::None: return "kiln::cuda::ScatterAssign";
    case ScatterReduce::Sum: return "kiln::cuda::ScatterSum";
    case ScatterReduce::Prod: return "kiln::cuda::ScatterProd";
    case ScatterReduce::Max: return "kiln::cuda::ScatterMax";
    default: return "kiln::cuda::ScatterMin";
  }
}
const char* reduce_suffix(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::None: return "";
    case ScatterReduce::Sum: return "Sum";
    case ScatterReduce::Prod: return "Prod";
    case ScatterReduce::Max: return "Max";
    default: return "Min";
  }
}
// Assignment only moves elements: raw bytes of the element's size.
Dtype scatter_element(ScatterReduce r, Dtype dt) {
  return r == ScatterReduce::None ? raw_dtype(dt) : dt;
}

// complex64 scatters on the GPU when it assigns (raw moves), adds (an
// atomic add per part, device/indexing.cuh) or multiplies (compare-and-swap
// of the 8-byte value); max and min refuse complex values.
bool scatters_on_gpu(ScatterReduce r, Dtype dt) {
  if (dt == complex64) {
    return r == ScatterReduce::None || r == ScatterReduce::Sum ||
           r == ScatterReduce::Prod;
  }
  return gpu_supports(dt);
}

JitKernel gather_one(Dtype dt, Dtype index, int n, bool ic, bool sc,
                     bool large) {
  Dtype e = raw_dtype(dt);
  std::string name = std::string{letter(ic), letter(sc)} + "Gather" +
                     std::to_string(n) + suffix(e, index, large);
  std::string expr = "kiln::cuda::gather<" + std::string(device_type(e)) +
                     ", " + device_type(index) + ", " + std::to_string(n) +
                     ", " + position_type(large) + ", " + flag(ic) + ", " +
                     flag(sc) + ">";
  return {name, source, expr, {}};
}

const char* pass_name(ScatterPass pass) {
  switch (pass) {
    case ScatterPass::Direct: return "";
    case ScatterPass::Mark: return "Mark";
    default: return "Write";
  }
}
std::string pass_args(ScatterPass pass) {
  switch (pass) {
    case ScatterPass::Direct: return "kiln::cuda::Ownership::Direct";
    case ScatterPass::Mark: return "kiln::cuda::Ownership::Mark";
    default: return "kiln::cuda::Ownership::Write";
  }
}

JitKernel scatter_one(ScatterReduce r, Dtype dt, Dtype index, int n,
                      bool contiguous, bool large, ScatterPass pass,
                      bool per_start) {
  Dtype e = scatter_element(r, dt);
  std::string name = std::string(1, letter(contiguous)) + "Scatter" +
                     reduce_suffix(r) + pass_name(pass);
  if (pass != ScatterPass::Direct) name += per_start ? "S" : "E";
  name += std::to_string(n) + suffix(e, index, large);
  std::string expr = "kiln::cuda::scatter<" + std::string(device_type(e)) +
                     ", " + device_type(index) + ", " + std::to_string(n) +
                     ", " + functor(r) + ", " + position_type(large) + ", " +
                     flag(contiguous) + ", " + pass_args(pass) + ", " +
                     flag(per_start) + ">";
  return {name, source, expr, {}};
}

// Host twin of device/indexing.cuh's IndexAxes<N>.
template <int N>
struct IndexAxes {
  const void* ptr[N > 0 ? N : 1];
  int64_t dim[N > 0 ? N : 1];
  int64_t stride[N > 0 ? N : 1];
  int64_t last_start[N > 0 ? N : 1];
  int64_t start_stride[N > 0 ? N : 1];
};

// Scratch for the Mark/Write passes: one zeroed uint32 per cell (the last
// position + 1 to land there). Callers check that cells fit an int32 shape
// and positions a uint32 first.
array owner_cells(int64_t cells, const Stream& s) {
  auto owner = array::uninitialized({static_cast<int32_t>(cells)}, uint32);
  set_device_output(owner, s);
  KILN_CHECK_CUDA(cudaMemsetAsync(owner.raw_data_ptr(), 0,
                                  static_cast<size_t>(cells) * 4,
                                  cuda_stream(s)));
  return owner;
}

// Calls f(std::integral_constant<int, n>) for n in [0, max_ndim].
template <typename F, int... Ns>
bool with_count(int n, F&& f, std::integer_sequence<int, Ns...>) {
  bool result = false;
  ((n == Ns ? (result = f(std::integral_constant<int, Ns>{}), true) : false) ||
   ...);
  return result;
}
template <typename F>
bool with_count(int n, F&& f) {
  if (n < 0 || n > max_ndim) return false;
  return with_count(n, f, std::make_integer_sequence<int, max_ndim + 1>{});
}

// Index arrays of mixed dtypes are converted to int64 on the device so one
// kernel reads them all. Returns false when a conversion cannot run here.
bool one_index_dtype(std::vector<array>& idx, Dtype& dt, const Stream& s) {
  dt = idx.empty() ? int32 : idx[0].dtype();
  bool same = true;
  for (auto& a : idx) same = same && a.dtype() == dt;
  if (same) return true;
  dt = int64;
  for (auto& a : idx) {
    if (a.dtype() == int64) continue;
    auto t = array::uninitialized(a.shape(), int64);
    if (!copy_row_major(a, t, s)) return false;
    a = t;
  }
  return true;
}

bool all_row_contiguous(const std::vector<array>& idx) {
  for (auto& a : idx) {
    if (!a.flags().row_contiguous) return false;
  }
  return true;
}

// One run of stride 1 (or a single element): positions are offsets.
template <size_t K>
bool is_run(const Strided<K>& l, size_t k) {
  return l.ndim == 1 && (l.shape[0] == 1 || l.strides[k][0] == 1);
}

template <int N>
bool gather(const array& src, std::vector<array> idx,
            const std::vector<int>& axes, const Shape& slice_sizes,
            array& out, const Stream& s) {
  constexpr size_t K = N > 0 ? N : 1;
  Dtype index_dt = int32;
  if (!one_index_dtype(idx, index_dt, s)) return false;
  Shape idx_shape = N > 0 ? idx[0].shape() : Shape{};
  std::array<Strides, K> st{};
  for (int k = 0; k < N; ++k) st[k] = idx[k].strides();
  Strided<K> il;
  Strided<1> sl;
  if (!collapsed(idx_shape, st, il) ||
      !collapsed(slice_sizes, std::array<Strides, 1>{src.strides()}, sl)) {
    return false;
  }
  set_device_output(out, s);
  int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) return true;
  IndexAxes<N> ax{};
  for (int k = 0; k < N; ++k) {
    int a = axes[k];
    ax.ptr[k] = device_ptr(idx[k], s);
    ax.dim[k] = src.shape(a);
    ax.stride[k] = src.strides()[a];
    ax.last_start[k] = src.shape(a) - slice_sizes[a];
  }
  int64_t slice_size = static_cast<int64_t>(shape_size(slice_sizes));
  bool large = out.size() > UINT32_MAX;
  CUfunction f = get_kernel(gather_kernel(src.dtype(), index_dt, N,
                                          all_row_contiguous(idx),
                                          is_run(sl, 0), large));
  void* in_ptr = device_ptr(src, s);
  void* out_ptr = out.raw_data_ptr();
  void* args[] = {&in_ptr, &out_ptr, &n, &slice_size, &ax, &il, &sl};
  launch(f, n, 1, args, s.index);
  return true;
}

template <int N>
bool scatter(ScatterReduce r, const std::vector<array>& inputs,
             const std::vector<int>& axes, array& out, const Stream& s) {
  const array& upd = inputs.back();
  if (!scatters_on_gpu(r, out.dtype())) return false;
  std::vector<array> idx(inputs.begin() + 1, inputs.end() - 1);
  Dtype index_dt = int32;
  if (!one_index_dtype(idx, index_dt, s)) return false;
  size_t idx_nd = upd.ndim() - out.ndim();
  const Shape& us = upd.shape();
  const Strides& ust = upd.strides();
  Shape idx_shape(us.begin(), us.begin() + idx_nd);
  Shape slice_shape(us.begin() + idx_nd, us.end());
  Strides out_strides = row_major_strides(out.shape());
  std::array<Strides, N + 1> st{};
  for (int k = 0; k < N; ++k) st[k] = idx[k].strides();
  st[N] = Strides(ust.begin(), ust.begin() + idx_nd);
  Strided<N + 1> il;
  Strided<2> sl;
  Strided<1> run;
  Strides upd_slice(ust.begin() + idx_nd, ust.end());
  if (!collapsed(idx_shape, st, il) ||
      !collapsed(slice_shape, std::array<Strides, 2>{out_strides, upd_slice},
                 sl) ||
      !collapsed(slice_shape, std::array<Strides, 1>{out_strides}, run)) {
    return false;
  }
  int64_t n = static_cast<int64_t>(upd.size());
  int64_t slice_size = static_cast<int64_t>(shape_size(slice_shape));
  int64_t positions = slice_size > 0 ? n / slice_size : 0;
  // Assignments may collide only when there are several positions.
  bool last_wins = r == ScatterReduce::None && positions > 1;
  bool per_start = true;
  int64_t cells = 1;
  IndexAxes<N> ax{};
  for (int k = N - 1; k >= 0; --k) {
    int a = axes[k];
    ax.dim[k] = out.shape(a);
    ax.stride[k] = out_strides[a];
    ax.last_start[k] = out.shape(a) - slice_shape[a];
    ax.start_stride[k] = cells;
    cells *= out.shape(a);
    per_start = per_start && slice_shape[a] == 1;
  }
  if (!per_start) cells = static_cast<int64_t>(out.size());
  if (last_wins && (cells > INT32_MAX ||
                    positions >= static_cast<int64_t>(UINT32_MAX))) {
    return false;
  }
  // out starts as a row-major copy of the input.
  if (!copy_or_donate(inputs[0], out, s)) return false;
  if (n == 0) return true;
  for (int k = 0; k < N; ++k) ax.ptr[k] = device_ptr(idx[k], s);
  bool contiguous = all_row_contiguous(idx) &&
                    upd.flags().row_contiguous && is_run(run, 0);
  bool large = upd.size() > UINT32_MAX;
  void* upd_ptr = device_ptr(upd, s);
  void* out_ptr = out.raw_data_ptr();
  void* owner_ptr = nullptr;
  void* args[] = {&upd_ptr, &out_ptr, &owner_ptr, &n, &slice_size,
                  &ax,      &il,      &sl};
  if (!last_wins) {
    launch(get_kernel(scatter_kernel(r, out.dtype(), index_dt, N, contiguous,
                                     large)),
           n, 1, args, s.index);
    return true;
  }
  array owner = owner_cells(cells, s);
  owner_ptr = owner.raw_data_ptr();
  for (ScatterPass pass : {ScatterPass::Mark, ScatterPass::Write}) {
    launch(get_kernel(scatter_kernel(r, out.dtype(), index_dt, N, contiguous,
                                     large, pass, per_start)),
           n, 1, args, s.index);
  }
  return true;
}

bool gather_axis(const std::vector<array>& inputs, int axis, array& out,
                 const Stream& s) {
  const array& src = inputs[0];
  const array& idx = inputs[1];
  std::array<Strides, 2> st{src.strides(), idx.strides()};
  st[0][axis] = 0; // the index values choose the position along axis
  Strided<2> l;
  if (!collapsed(out.shape(), st, l)) return false;
  set_device_output(out, s);
  int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) return true;
  int64_t dim = src.shape(axis), axis_stride = src.strides()[axis];
  bool large = out.size() > UINT32_MAX;
  CUfunction f =
      get_kernel(gather_axis_kernel(src.dtype(), idx.dtype(), large));
  void* src_ptr = device_ptr(src, s);
  void* idx_ptr = device_ptr(idx, s);
  void* out_ptr = out.raw_data_ptr();
  void* args[] = {&src_ptr, &idx_ptr, &out_ptr, &n, &dim, &axis_stride, &l};
  launch(f, n, 1, args, s.index);
  return true;
}

bool scatter_axis(ScatterReduce r, const std::vector<array>& inputs,
                  int axis, array& out, const Stream& s) {
  const array& idx = inputs[1];
  const array& upd = inputs[2];
  if (!scatters_on_gpu(r, out.dtype())) return false;
  Strides out_strides = row_major_strides(out.shape());
  std::array<Strides, 3> st{out_strides, upd.strides(), idx.strides()};
  st[0][axis] = 0; // the index values choose the position along axis
  Strided<3> l;
  if (!collapsed(upd.shape(), st, l)) return false;
  int64_t n = static_cast<int64_t>(upd.size());
  // Assignments collide only when several updates share an output line.
  bool last_wins = r == ScatterReduce::None && upd.shape(axis) > 1;
  if (last_wins && (out.size() > INT32_MAX ||
                    n >= static_cast<int64_t>(UINT32_MAX))) {
    return false;
  }
  if (!copy_or_donate(inputs[0], out, s)) return false;
  if (n == 0) return true;
  int64_t dim = out.shape(axis), axis_stride = out_strides[axis];
  bool large = upd.size() > UINT32_MAX;
  void* upd_ptr = device_ptr(upd, s);
  void* idx_ptr = device_ptr(idx, s);
  void* out_ptr = out.raw_data_ptr();
  void* owner_ptr = nullptr;
  void* args[] = {&upd_ptr, &idx_ptr, &out_ptr,     &owner_ptr,
                  &n,       &dim,     &axis_stride, &l};
  if (!last_wins) {
    launch(get_kernel(scatter_axis_kernel(r, out.dtype(), idx.dtype(), large)),
           n, 1, args, s.index);
    return true;
  }
  array owner = owner_cells(static_cast<int64_t>(out.size()), s);
  owner_ptr = owner.raw_data_ptr();
  for (ScatterPass pass : {ScatterPass::Mark, ScatterPass::Write}) {
    launch(get_kernel(scatter_axis_kernel(r, out.dtype(), idx.dtype(), large,
                                          pass)),
           n, 1, args, s.index);
  }
  return true;
}

} // namespace

Dtype raw_dtype(Dtype dt) {
  switch (dt.size) {
    case 1: return uint8;
    case 2: return uint16;
    case 4: return uint32;
    default: return uint64;
  }
}

JitKernel gather_kernel(Dtype dt, Dtype index, int num_indices,
                        bool index_contiguous, bool slice_contiguous,
                        bool large) {
  JitKernel k = gather_one(dt, index, num_indices, index_contiguous,
                           slice_contiguous, large);
  // The other layouts of the same gather come along in one compile.
  for (bool ic : {true, false}) {
    for (bool sc : {true, false}) {
      if (ic == index_contiguous && sc == slice_contiguous) continue;
      JitKernel o = gather_one(dt, index, num_indices, ic, sc, large);
      k.siblings.emplace_back(o.name, o.expression);
    }
  }
  return k;
}

JitKernel scatter_kernel(ScatterReduce r, Dtype dt, Dtype index,
                         int num_indices, bool contiguous, bool large,
                         ScatterPass pass, bool per_start) {
  auto one = [&](bool c, ScatterPass p) {
    return scatter_one(r, dt, index, num_indices, c, large, p, per_start);
  };
  JitKernel k = one(contiguous, pass);
  // The other layout, and the other pass of a Mark/Write pair.
  std::vector<JitKernel> others = {one(!contiguous, pass)};
  if (pass != ScatterPass::Direct) {
    ScatterPass other = pass == ScatterPass::Mark ? ScatterPass::Write
                                                  : ScatterPass::Mark;
    others.push_back(one(contiguous, other));
    others.push_back(one(!contiguous, other));
  }
  for (auto& o : others) k.siblings.emplace_back(o.name, o.expression);
  return k;
}

JitKernel gather_axis_kernel(Dtype dt, Dtype index, bool large) {
  Dtype e = raw_dtype(dt);
  std::string expr = "kiln::cuda::gather_axis<" +
                     std::string(device_type(e)) + ", " +
                     device_type(index) + ", " + position_type(large) + ">";
  return {"gGatherAxis" + suffix(e, index, large), source, expr, {}};
}

JitKernel scatter_axis_kernel(ScatterReduce r, Dtype dt, Dtype index,
                              bool large, ScatterPass pass) {
  auto one = [&](ScatterPass p) -> JitKernel {
    Dtype e = scatter_element(r, dt);
    std::string expr = "kiln::cuda::scatter_axis<" +
                       std::string(device_type(e)) + ", " +
                       device_type(index) + ", " + functor(r) + ", " +
                       position_type(large) + ", " + pass_args(p) + ">";
    return {"gScatterAxis" + std::string(reduce_suffix(r)) + pass_name(p) +
                suffix(e, index, large),
            source, expr, {}};
  };
  JitKernel k = one(pass);
  if (pass != ScatterPass::Direct) {
    JitKernel o = one(pass == ScatterPass::Mark ? ScatterPass::Write
                                                : ScatterPass::Mark);
    k.siblings.emplace_back(o.name, o.expression);
  }
  return k;
}

} // namespace kiln::cuda

namespace kiln {

void Gather::eval_gpu(const std::vector<array>& inputs, array& out) {
  std::vector<array> idx(inputs.begin() + 1, inputs.end());
  bool done = cuda::with_count(static_cast<int>(idx.size()), [&](auto n) {
    return cuda::gather<decltype(n)::value>(
        inputs[0], idx, axes_, slice_sizes(inputs[0].shape()), out, stream());
  });
  if (!done) cuda::eval_on_cpu(*this, inputs, out);
}

void Scatter::eval_gpu(const std::vector<array>& inputs, array& out) {
  bool done =
      cuda::with_count(static_cast<int>(inputs.size()) - 2, [&](auto n) {
        return cuda::scatter<decltype(n)::value>(reduce_, inputs, axes_, out,
                                                 stream());
      });
  if (!done) cuda::eval_on_cpu(*this, inputs, out);
}

void GatherAxis::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::gather_axis(inputs, axis_, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

void ScatterAxis::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::scatter_axis(reduce_, inputs, axis_, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

} // namespace kiln
