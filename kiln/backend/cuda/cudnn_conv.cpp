// cuDNN convolution: one cudnn-frontend graph per problem (route, dtype,
// shapes, parameters), built at first use and cached with attention's
// (cudnn_graphs.h); each call runs it on the kiln stream's CUDA stream with
// this call's pointers. kiln's (N, S..., C) arrays are cuDNN's NHWC layout:
// dims (N, C, S...) with C innermost in memory, and the weight (C_out,
// K..., C_in / groups) the same way. A Convolution node is one of three
// cuDNN operations (CudnnConvRoute): a forward convolution as it stands;
// with input dilation a data gradient; and, relabeled, a weight gradient,
// which is what the weight's vjp builds (the batch as channels, the
// cotangent as a kernel as long as the output). tools/
// cudnn_conv_mappings.py checks the two gradients' mappings (params_of)
// against cuDNN's definitions by emulation.
#include "kiln/backend/cuda/cudnn_conv.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kiln/backend/cuda/device.h"
#include "kiln/core/env.h"
#include "kiln/primitives/conv.h"

#if KILN_HAS_CUDNN_FRONTEND
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cudnn_graphs.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/gemm.h"
#include "kiln/core/layout.h"
#endif

namespace kiln::cuda {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> enabled{env::flag("KILN_CUDNN_CONV", true)};
  return enabled;
}

std::atomic<int64_t> forward_calls{0}, data_grad_calls{0},
    weight_grad_calls{0}, graphs_built{0};

bool input_dilated(const Convolution& p) {
  for (int id : p.input_dilation()) {
    if (id != 1) return true;
  }
  return false;
}

bool long_kernel(const array& w) {
  for (int d = 1; d + 1 < static_cast<int>(w.ndim()); ++d) {
    if (w.shape(d) > cudnn_conv_max_kernel) return true;
  }
  return false;
}

} // namespace

bool set_cudnn_conv_enabled(bool enabled) {
  return enabled_flag().exchange(enabled);
}

CudnnConvCounts cudnn_conv_counts() {
  int64_t f = forward_calls, d = data_grad_calls, w = weight_grad_calls;
  return {f + d + w, f, d, w, graphs_built.load()};
}

CudnnConvRoute cudnn_conv_route(const Convolution& p, const array& in,
                                const array& w, const array& out) {
  using R = CudnnConvRoute;
  Dtype dt = out.dtype();
  if (!(dt == float16 || dt == bfloat16 || dt == float32)) return R::none;
  if (in.dtype() != dt || w.dtype() != dt) return R::none;
  int nd = static_cast<int>(in.ndim()) - 2;
  if (nd < 1 || nd > 3) return R::none;
  // Empty problems are the caller's; cuDNN's kernels index in 32 bits.
  if (out.size() == 0 || in.shape(-1) == 0) return R::none;
  if (in.size() > INT32_MAX || w.size() > INT32_MAX ||
      out.size() > INT32_MAX) {
    return R::none;
  }
  if (input_dilated(p)) {
    // A data gradient: unit stride, paddings that leave cuDNN's (span - lo,
    // span - hi) non-negative, and the weight read with its channel roles
    // swapped group by group (a copy; depthwise weights as they are).
    if (long_kernel(w)) return R::none;
    for (int d = 0; d < nd; ++d) {
      int span = (w.shape(d + 1) - 1) * p.kernel_dilation()[d];
      if (p.stride()[d] != 1 || span < p.padding_lo()[d] ||
          span < p.padding_hi()[d]) {
        return R::none;
      }
    }
    return R::data_grad;
  }
  for (int d = 0; d < nd; ++d) {
    if (p.padding_lo()[d] < 0) return R::none;
  }
  if (long_kernel(w) && !p.flip()) {
    // A kernel longer than the forward engines are for, and an output no
    // longer than their kernels: the weight's gradient (its kernel the
    // cotangent, its output the weight), which the vjp never flips. Long
    // kernels with long outputs (a conv1d of 31 taps) are forward ones,
    // but not a kernel longer than its output: that is the weight gradient
    // of such a convolution (a 512-tap kernel, 31 outputs), where cuDNN's
    // forward engines took 27 ms for the Conformer layer (im2col runs it).
    bool short_out = true, kernel_past_out = false;
    for (int d = 1; d <= nd; ++d) {
      short_out = short_out && out.shape(d) <= cudnn_conv_max_kernel;
      kernel_past_out = kernel_past_out || w.shape(d) > out.shape(d);
    }
    if (short_out) return R::weight_grad;
    if (kernel_past_out) return R::none;
  }
  for (int d = 0; d < nd; ++d) {
    if (p.padding_hi()[d] < 0) return R::none;
  }
  return R::forward;
}

#if !KILN_HAS_CUDNN_FRONTEND

bool cudnn_conv_available() { return false; }

bool cudnn_conv(const Convolution&, const array&, const array&, array&,
                const Stream&) {
  return false;
}

bool cudnn_conv_weight_grad(const ConvolutionWeightGrad&, const array&,
                            const array&, array&, const Stream&) {
  return false;
}

#else

namespace fe = cudnn_frontend;

namespace {

// Tensor uids in the graphs' variant packs: the node's input, weight and
// output, whatever roles a route gives them.
enum Uid : int64_t { In = 1, Weight, Out };

fe::DataType_t io_type(Dtype dt) {
  if (dt == float16) return fe::DataType_t::HALF;
  if (dt == bfloat16) return fe::DataType_t::BFLOAT16;
  return fe::DataType_t::FLOAT;
}

// A row-major (N, S..., C) array as cuDNN sees it: dims (N, C, S...) with
// the strides of that memory order. One spatial axis gets a leading one of
// length 1 (cuDNN's convolutions take 2 or 3).
struct Layout {
  std::vector<int64_t> dims, strides;
};

Layout nhwc(const Shape& shape) {
  std::vector<int64_t> spatial(shape.begin() + 1, shape.end() - 1);
  if (spatial.size() == 1) spatial.insert(spatial.begin(), 1);
  const int64_t c = shape.back();
  std::vector<int64_t> strides(spatial.size());
  int64_t step = c;
  for (size_t i = spatial.size(); i-- > 0;) {
    strides[i] = step;
    step *= spatial[i];
  }
  Layout l{{shape[0], c}, {step, 1}};
  l.dims.insert(l.dims.end(), spatial.begin(), spatial.end());
  l.strides.insert(l.strides.end(), strides.begin(), strides.end());
  return l;
}

// shape with its first and last axes swapped: the channel roles of the
// data and weight gradients' operands.
Shape ends_swapped(Shape shape) {
  std::swap(shape.front(), shape.back());
  return shape;
}

// The operation's parameters per cuDNN axis (the 1-d case's leading axis:
// no padding, unit stride and dilation), and the lengths by which the
// weight gradient's x is cut short (its last elements unread).
//  - forward: the node as it stands.
//  - data gradient: out[o] = sum_k x[(o + k kd - lo) / id] w'[k] (w' = w
//    turned around when flipped) is cuDNN's dgrad of a forward convolution
//    of stride id, dilation kd and paddings span - lo and span - hi (span
//    = (K - 1) kd), x as its dy, the weight with its channel roles swapped,
//    the kernel turned around once more: cuDNN's cross-correlation where
//    kiln flips, its convolution mode where not.
//  - weight gradient: out[n][o][k] = sum_{p,c} x[n][o s + p kd - lo][c]
//    w[k][p][c] is cuDNN's wgrad dW[k][n][o] of a forward convolution of
//    stride kd and dilation s with x's channels as its batch (x with its
//    ends swapped), w as its dy (ends swapped) and out as dW (ends
//    swapped); padding lo before, and after whatever makes the forward's
//    output as long as the kernel, x cut short where that is negative.
struct Params {
  CudnnConvRoute route;
  std::vector<int64_t> pre, post, stride, dilation, x_len;
  bool flip; // cuDNN's convolution mode
};

// One axis of a weight gradient as cuDNN's wgrad of a forward convolution
// (padding lo, stride, dilation) of `kernel` taps and `out` outputs over x
// of length len: padded after by whatever makes the forward's output `out`
// long, x cut short where that is negative (its last elements unread).
void wgrad_axis(Params& q, int64_t lo, int64_t stride, int64_t dilation,
                int64_t kernel, int64_t out, int64_t len) {
  int64_t post = (kernel - 1) * dilation + (out - 1) * stride + 1 - len - lo;
  q.pre.push_back(lo);
  q.post.push_back(std::max<int64_t>(post, 0));
  q.stride.push_back(stride);
  q.dilation.push_back(dilation);
  q.x_len.push_back(len + std::min<int64_t>(post, 0));
}

Params params_of(CudnnConvRoute route, const Convolution& p, const Shape& x,
                 const Shape& w, const Shape& y) {
  using R = CudnnConvRoute;
  int nd = static_cast<int>(x.size()) - 2;
  Params q{route, {}, {}, {}, {}, {}, false};
  if (nd == 1) {
    q.pre = q.post = {0};
    q.stride = q.dilation = q.x_len = {1};
  }
  for (int d = 0; d < nd; ++d) {
    int64_t s = p.stride()[d], kd = p.kernel_dilation()[d];
    int64_t lo = p.padding_lo()[d], hi = p.padding_hi()[d];
    int64_t k = w[d + 1], len = x[d + 1];
    if (route == R::forward) {
      q.pre.push_back(lo);
      q.post.push_back(hi);
      q.stride.push_back(s);
      q.dilation.push_back(kd);
    } else if (route == R::data_grad) {
      q.pre.push_back((k - 1) * kd - lo);
      q.post.push_back((k - 1) * kd - hi);
      q.stride.push_back(p.input_dilation()[d]);
      q.dilation.push_back(kd);
    } else {
      wgrad_axis(q, lo, kd, s, y[d + 1], k, len);
      continue;
    }
    q.x_len.push_back(len);
  }
  q.flip = route == R::data_grad ? !p.flip() : p.flip();
  return q;
}

// cuDNN's wgrad of the forward convolution p itself: x and the cotangent
// as they are, the weight's shape w.
Params direct_wgrad_params(const Convolution& p, const Shape& x,
                           const Shape& w, const Shape& dy) {
  Params q{CudnnConvRoute::weight_grad, {}, {}, {}, {}, {}, p.flip()};
  int nd = static_cast<int>(x.size()) - 2;
  if (nd == 1) {
    q.pre = q.post = {0};
    q.stride = q.dilation = q.x_len = {1};
  }
  for (int d = 0; d < nd; ++d) {
    wgrad_axis(q, p.padding_lo()[d], p.stride()[d], p.kernel_dilation()[d],
               w[d + 1], dy[d + 1], x[d + 1]);
  }
  return q;
}

void describe(std::ostringstream& key, const std::vector<int64_t>& v) {
  for (int64_t x : v) key << x << ',';
  key << ';';
}

// What a graph depends on: route, dtype, whether float32 may use TF32, the
// shapes (the layouts are always row-major) and the parameters.
std::string graph_key(Dtype dt, bool tf32, const Shape& x, const Shape& w,
                      const Shape& y, const Params& q) {
  std::ostringstream key;
  key << static_cast<int>(q.route) << ':' << dtype_name(dt) << ':' << tf32
      << ':' << q.flip << ':';
  describe(key, {x.begin(), x.end()});
  describe(key, {w.begin(), w.end()});
  describe(key, {y.begin(), y.end()});
  describe(key, q.pre);
  describe(key, q.post);
  describe(key, q.stride);
  describe(key, q.dilation);
  describe(key, q.x_len);
  return key.str();
}

// The graph on x, w and y as it reads and writes them (row-major; for the
// gradients the arrays with their ends swapped where the route says so).
void build(fe::graph::Graph& g, Dtype dt, const Shape& x, const Shape& w,
           const Shape& y, const Params& q) {
  using R = CudnnConvRoute;
  g.set_io_data_type(io_type(dt))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, const Layout& l) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim(l.dims)
                        .set_stride(l.strides));
  };
  Layout lx = nhwc(x);
  std::copy(q.x_len.begin(), q.x_len.end(), lx.dims.begin() + 2);
  auto tx = tensor("X", In, lx), tw = tensor("W", Weight, nhwc(w));
  auto mode = q.flip ? fe::ConvolutionMode_t::CONVOLUTION
                     : fe::ConvolutionMode_t::CROSS_CORRELATION;
  std::shared_ptr<fe::graph::Tensor_attributes> ty;
  if (q.route == R::forward) {
    ty = g.conv_fprop(tx, tw,
                      fe::graph::Conv_fprop_attributes()
                          .set_name("conv")
                          .set_pre_padding(q.pre)
                          .set_post_padding(q.post)
                          .set_stride(q.stride)
                          .set_dilation(q.dilation)
                          .set_convolution_mode(mode));
  } else if (q.route == R::data_grad) {
    ty = g.conv_dgrad(tx, tw,
                      fe::graph::Conv_dgrad_attributes()
                          .set_name("conv_dgrad")
                          .set_pre_padding(q.pre)
                          .set_post_padding(q.post)
                          .set_stride(q.stride)
                          .set_dilation(q.dilation)
                          .set_convolution_mode(mode));
  } else {
    ty = g.conv_wgrad(tw, tx,
                      fe::graph::Conv_wgrad_attributes()
                          .set_name("conv_wgrad")
                          .set_pre_padding(q.pre)
                          .set_post_padding(q.post)
                          .set_stride(q.stride)
                          .set_dilation(q.dilation)
                          .set_convolution_mode(mode));
  }
  Layout ly = nhwc(y);
  ty->set_output(true).set_uid(Out).set_dim(ly.dims).set_stride(ly.strides);
}

// Engines left out: the ones whose sums are not float32 sums of the exact
// products as kiln's other paths compute them (inputs rounded down, sums
// in 16 bits, Winograd's and FFT's transforms), the nondeterministic ones
// (a result is the same every run), and for float32 the tensor-core (TF32)
// ones unless TF32 is allowed, as for float32 GEMMs. Heuristics A first;
// the fallback list covers shapes A has no engine for.
cudnn::PlanChoice plan_choice(Dtype dt, bool tf32) {
  using N = fe::NumericalNote_t;
  cudnn::PlanChoice c;
  c.heuristics = {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK};
  c.deselect = {N::DOWN_CONVERT_INPUTS,  N::REDUCED_PRECISION_REDUCTION,
                N::NONDETERMINISTIC,     N::FFT,
                N::WINOGRAD,             N::WINOGRAD_TILE_4x4,
                N::WINOGRAD_TILE_6x6,    N::WINOGRAD_TILE_13x13};
  if (dt == float32 && !tf32) c.deselect.push_back(N::TENSOR_CORE);
  return c;
}

// a as the graph reads it: row-major, starting on a 16-byte boundary (the
// alignment cudnn-frontend declares for its tensors); others are copied.
bool operand(const array& a, array& out, const Stream& s) {
  if (!row_contiguous(a, out, s)) return false;
  if (reinterpret_cast<uintptr_t>(device_ptr(out, s)) % 16 == 0) return true;
  array aligned = array::uninitialized(a.shape(), a.dtype());
  if (!copy_row_major(out, aligned, s)) return false;
  out = aligned;
  return true;
}

// Writes src into dst, a device array of src's shape with the first and
// last axes swapped: each source axis steps by the destination's stride
// of the axis it becomes.
bool write_ends_swapped(const array& src, array& dst, const Stream& s) {
  const Strides& ds = dst.strides();
  Strides to(ds.begin(), ds.end());
  std::swap(to.front(), to.back());
  if (!can_copy_into(src, dst.dtype(), to)) return false;
  copy_into(src, dst, to, 0, s);
  return true;
}

// a's memory as the row-major array of a's shape with its ends swapped,
// when it is one: the vjp's transposes of a row-major input or cotangent
// (the weight gradient's operands) are such views, read in place.
bool ends_swapped_view(const array& a, array& out, const Stream& s) {
  if (a.ndim() < 2 || !a.on_device()) return false;
  Shape es = ends_swapped(a.shape());
  Strides want = row_major_strides(es), have = a.strides();
  std::swap(have.front(), have.back());
  for (size_t d = 0; d < es.size(); ++d) {
    if (es[d] != 1 && have[d] != want[d]) return false;
  }
  if (reinterpret_cast<uintptr_t>(device_ptr(a, s)) % 16 != 0) return false;
  out = array::uninitialized(es, a.dtype());
  auto l = layout_of(es, want);
  out.copy_shared_buffer(a, want, l.flags, l.data_size);
  return true;
}

// src with its ends swapped: in place when ends_swapped_view finds it so,
// else a new row-major device array.
bool ends_swapped_copy(const array& src, array& out, const Stream& s) {
  if (ends_swapped_view(src, out, s)) return true;
  out = array::uninitialized(ends_swapped(src.shape()), src.dtype());
  set_device_output(out, s);
  return write_ends_swapped(src, out, s);
}

// src's elements viewed row-major as view_shape, written into a new
// row-major array of out_shape whose axes, split as the view's are, come
// in the order `perm` (its axis i is the view's axis perm[i]).
bool permuted_copy(const array& src, const Shape& view_shape,
                   const std::vector<int>& perm, const Shape& out_shape,
                   array& out, const Stream& s) {
  array rows = src;
  if (!operand(src, rows, s)) return false;
  Strides vst = row_major_strides(view_shape);
  array view = array::uninitialized(view_shape, src.dtype());
  auto l = layout_of(view_shape, vst);
  view.copy_shared_buffer(rows, vst, l.flags, l.data_size);
  // Each view axis steps by the stride of the axis it becomes.
  Shape split(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) split[i] = view_shape[perm[i]];
  Strides split_st = row_major_strides(split);
  Strides to(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) to[perm[i]] = split_st[i];
  out = array::uninitialized(out_shape, src.dtype());
  set_device_output(out, s);
  if (!can_copy_into(view, out.dtype(), to)) return false;
  copy_into(view, out, to, 0, s);
  return true;
}

// The weight gradient's x: the node's input (C_in/g, S..., g * N) (the
// vjp's transpose of the forward's input) as that input, (N, S..., C_in)
// with channel grp * C_in/g + c from the input's channels grp * N + n.
bool wgrad_input(const array& in, int groups, array& out, const Stream& s) {
  if (groups == 1 && ends_swapped_view(in, out, s)) return true;
  const int nd = static_cast<int>(in.ndim()) - 2;
  const int cg = in.shape(0), n = in.shape(-1) / groups;
  // (C_in/g, S..., g, N) -> (N, S..., g, C_in/g)
  Shape vs = in.shape();
  vs.back() = groups;
  vs.push_back(n);
  std::vector<int> perm = {nd + 2};
  for (int d = 1; d <= nd; ++d) perm.push_back(d);
  perm.insert(perm.end(), {nd + 1, 0});
  Shape xs = ends_swapped(in.shape());
  xs.front() = n;
  xs.back() = groups * cg;
  return permuted_copy(in, vs, perm, xs, out, s);
}

// The data gradient's weight: the node's (C_in, K..., C_out/g) (the vjp's
// channel-swapped kernel) as the forward's (C_out, K..., C_in/g), channel
// roles swapped group by group; with one channel in and out per group
// (depthwise) the same array.
Shape group_swapped(const Shape& w, int groups) {
  Shape out = ends_swapped(w);
  out.front() = groups * w.back();
  out.back() = w.front() / groups;
  return out;
}

bool group_swapped_copy(const array& w, int groups, array& out,
                        const Stream& s) {
  if (groups == 1) return ends_swapped_copy(w, out, s);
  if (w.shape(0) == groups && w.shape(-1) == 1) return operand(w, out, s);
  const int nd = static_cast<int>(w.ndim()) - 2;
  // (g, C_in/g, K..., C_out/g) -> (g, C_out/g, K..., C_in/g)
  Shape vs = w.shape();
  vs.front() = w.shape(0) / groups;
  vs.insert(vs.begin(), groups);
  std::vector<int> perm = {0, nd + 2};
  for (int d = 2; d <= nd + 1; ++d) perm.push_back(d);
  perm.push_back(1);
  return permuted_copy(w, vs, perm, group_swapped(w.shape(), groups), out,
                       s);
}

cudnn::Library* usable() {
  if (!enabled_flag()) return nullptr;
  return cudnn::library();
}

// q's graph on operands of shapes xs, ws and ys (their layouts
// row-major), built at first use; null when cuDNN declines it or some
// axis has every read in the padding (im2col's zeros then). c.mutex held.
fe::graph::Graph* graph_of(cudnn::Library& c, Dtype dt, const Shape& xs,
                           const Shape& ws, const Shape& ys, const Params& q) {
  for (int64_t len : q.x_len) {
    if (len <= 0) return nullptr;
  }
  bool tf32 = dt == float32 && allow_tf32();
  return cudnn::graph_for(
      c, graph_key(dt, tf32, xs, ws, ys, q), "convolution",
      [&](fe::graph::Graph& g) { build(g, dt, xs, ws, ys, q); },
      plan_choice(dt, tf32), graphs_built);
}

// g on device arrays x, w and y (y written). c.mutex held.
void run(cudnn::Library& c, fe::graph::Graph& g, const array& x,
         const array& w, array& y, const Stream& s) {
  std::unordered_map<int64_t, void*> pack = {{In, device_ptr(x, s)},
                                             {Weight, device_ptr(w, s)},
                                             {Out, y.raw_data_ptr()}};
  cudnn::execute(c, g, pack, s, "convolution");
}

} // namespace

bool cudnn_conv_available() { return usable() != nullptr; }

bool cudnn_conv(const Convolution& p, const array& in, const array& w,
                array& out, const Stream& s) {
  using R = CudnnConvRoute;
  const R route = cudnn_conv_route(p, in, w, out);
  if (route == R::none) return false;
  cudnn::Library* c = usable();
  if (!c) return false;
  Dtype dt = out.dtype();
  // The operands' shapes as the graph reads them.
  const bool dgrad = route == R::data_grad;
  const bool wgrad = route == R::weight_grad;
  Shape xs = in.shape();
  if (wgrad) { // (N, S..., g * C_in/g), as wgrad_input writes it
    xs.front() = in.shape(-1) / p.groups();
    xs.back() = p.groups() * in.shape(0);
  }
  Shape ws = dgrad   ? group_swapped(w.shape(), p.groups())
             : wgrad ? ends_swapped(w.shape())
                     : w.shape();
  Shape ys = wgrad ? ends_swapped(out.shape()) : out.shape();
  Params q = params_of(route, p, in.shape(), w.shape(), out.shape());
  std::lock_guard<std::mutex> lock(c->mutex);
  fe::graph::Graph* g = graph_of(*c, dt, xs, ws, ys, q);
  if (!g) return false;
  array x = in, wm = w, y = out;
  if (wgrad ? !wgrad_input(in, p.groups(), x, s) : !operand(in, x, s)) {
    return false;
  }
  bool weight_ready = dgrad   ? group_swapped_copy(w, p.groups(), wm, s)
                      : wgrad ? ends_swapped_copy(w, wm, s)
                              : operand(w, wm, s);
  if (!weight_ready) return false;
  if (wgrad) {
    y = array::uninitialized(ys, dt);
    set_device_output(y, s);
  } else {
    set_device_output(out, s);
  }
  run(*c, *g, x, wm, y, s);
  if (wgrad) {
    set_device_output(out, s);
    if (!write_ends_swapped(y, out, s)) {
      throw std::runtime_error(
          "[Convolution] the weight gradient's result cannot be copied");
    }
  }
  ++(route == R::forward     ? forward_calls
     : route == R::data_grad ? data_grad_calls
                             : weight_grad_calls);
  return true;
}

bool cudnn_conv_weight_grad(const ConvolutionWeightGrad& p, const array& x,
                            const array& dy, array& out, const Stream& s) {
  const Convolution& f = p.forward();
  Dtype dt = out.dtype();
  if (!(dt == float16 || dt == bfloat16 || dt == float32)) return false;
  if (x.dtype() != dt || dy.dtype() != dt) return false;
  int nd = static_cast<int>(x.ndim()) - 2;
  if (nd < 1 || nd > 3 || input_dilated(f)) return false;
  for (int lo : f.padding_lo()) {
    if (lo < 0) return false;
  }
  // Empty problems are the fallback's (zeros); cuDNN indexes in 32 bits.
  for (const array* a : {&x, &dy, static_cast<const array*>(&out)}) {
    if (a->size() == 0 || a->size() > INT32_MAX) return false;
  }
  cudnn::Library* c = usable();
  if (!c) return false;
  Params q = direct_wgrad_params(f, x.shape(), out.shape(), dy.shape());
  std::lock_guard<std::mutex> lock(c->mutex);
  fe::graph::Graph* g = graph_of(*c, dt, x.shape(), dy.shape(), out.shape(), q);
  if (!g) return false;
  array xm = x, dym = dy;
  if (!operand(x, xm, s) || !operand(dy, dym, s)) return false;
  set_device_output(out, s);
  run(*c, *g, xm, dym, out, s);
  ++weight_grad_calls;
  return true;
}

#endif

} // namespace kiln::cuda
