// cuDNN attention: one cudnn-frontend graph per problem (shapes, strides,
// dtype, scale, causal, pass), built at first use and cached; each call
// fills the graph's variant pack with this call's pointers and runs it on
// the kiln stream's CUDA stream (cuda_stream() first sends what the launch
// queue holds, so cuDNN's kernels run after the ones before them).
#include "kiln/backend/cuda/cudnn_attention.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kiln/backend/cuda/device.h"
#include "kiln/core/env.h"

#if KILN_HAS_CUDNN_FRONTEND
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/cudnn_graphs.h"
#endif

namespace kiln::cuda {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> enabled{env::flag("KILN_CUDNN_ATTENTION", true)};
  return enabled;
}

std::atomic<int64_t> forward_calls{0}, backward_calls{0}, graphs_built{0};

constexpr int64_t min_query_rows = 64;

} // namespace

bool set_cudnn_attention_enabled(bool enabled) {
  return enabled_flag().exchange(enabled);
}

CudnnAttentionCounts cudnn_attention_counts() {
  return {forward_calls.load(), backward_calls.load(), graphs_built.load()};
}

bool cudnn_attention_shape_fits(Dtype dt, int64_t q_len, int64_t k_len,
                                int64_t head_dim, int64_t v_head_dim,
                                bool causal) {
  if (!(dt == float16 || dt == bfloat16)) return false;
  if (v_head_dim != head_dim || head_dim % 8 != 0 || head_dim > 128) {
    return false;
  }
  // Decoding (a few query rows against a key length that grows each step)
  // would build a cuDNN graph per step; kiln's kernel needs no building.
  if (q_len < min_query_rows || k_len == 0) return false;
  // Under the causal rule a query row past the last key would see no key;
  // kiln's kernels define that row, cuDNN's bottom-right mask may not.
  return !(causal && q_len > k_len);
}

bool cudnn_attention_fits(const array& q, const array& k, const array& v,
                          bool causal) {
  Dtype dt = q.dtype();
  return k.dtype() == dt && v.dtype() == dt && k.shape(3) == q.shape(3) &&
         cudnn_attention_shape_fits(dt, q.shape(2), k.shape(2), q.shape(3),
                                    v.shape(3), causal);
}

#if !KILN_HAS_CUDNN_FRONTEND

bool cudnn_attention_available() { return false; }

bool cudnn_attention_forward(const array&, const array&, const array&, void*,
                             void*, const CudnnAttentionArgs&, const Stream&) {
  return false;
}

bool cudnn_attention_backward(const array&, const array&, const array&,
                              const void*, const array&, const void*, void*,
                              void*, void*, const CudnnAttentionArgs&,
                              const Stream&) {
  return false;
}

#else

namespace fe = cudnn_frontend;

namespace {

// Tensor uids in the graphs' variant packs.
enum Uid : int64_t { Q = 1, K, V, O, Stats, dO, dQ, dK, dV };

fe::DataType_t io_type(Dtype dt) {
  return dt == float16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
}

std::vector<int64_t> dims_of(const array& x) {
  return {x.shape(0), x.shape(1), x.shape(2), x.shape(3)};
}

std::vector<int64_t> strides_of(const array& x) {
  return {x.strides()[0], x.strides()[1], x.strides()[2], x.strides()[3]};
}

std::vector<int64_t> row_major(const std::vector<int64_t>& dims) {
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}

void describe(std::ostringstream& key, const array& x) {
  for (int d = 0; d < 4; ++d) key << x.shape(d) << ',';
  for (int d = 0; d < 4; ++d) key << x.strides()[d] << ',';
}

// What a graph depends on: pass, dtype, flags, and every operand's shape
// and strides (outputs are row-major, so the inputs' shapes fix theirs).
std::string graph_key(const char* pass, const array& q, const array& k,
                      const array& v, const array* dout,
                      const CudnnAttentionArgs& a) {
  std::ostringstream key;
  key << pass << ':' << (q.dtype() == float16 ? 'h' : 'b') << ':' << a.causal
      << ':' << std::hexfloat << a.scale << std::dec << ':';
  describe(key, q);
  describe(key, k);
  describe(key, v);
  if (dout) describe(key, *dout);
  return key.str();
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g,
                                                    const char* name,
                                                    int64_t uid,
                                                    const array& x) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(dims_of(x))
                      .set_stride(strides_of(x)));
}

template <typename Options>
void set_causal(Options& options, const array& q, const array& k,
                bool causal) {
  if (!causal) return;
  if (q.shape(2) == k.shape(2)) {
    options.set_causal_mask(true);
  } else {
    options.set_causal_mask_bottom_right(true);
  }
}

void set_types(fe::graph::Graph& g, Dtype dt) {
  g.set_io_data_type(io_type(dt))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
}

void build_forward(fe::graph::Graph& g, const array& q, const array& k,
                   const array& v, bool with_stats,
                   const CudnnAttentionArgs& a) {
  auto tq = input(g, "Q", Q, q), tk = input(g, "K", K, k),
       tv = input(g, "V", V, v);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("attention")
                     .set_generate_stats(with_stats)
                     .set_attn_scale(a.scale);
  set_causal(options, q, k, a.causal);
  auto [o, stats] = g.sdpa(tq, tk, tv, options);
  auto dims = dims_of(q);
  o->set_output(true).set_uid(O).set_dim(dims).set_stride(row_major(dims));
  if (with_stats) {
    std::vector<int64_t> sdims = {dims[0], dims[1], dims[2], 1};
    stats->set_output(true)
        .set_uid(Stats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(sdims)
        .set_stride(row_major(sdims));
  }
}

void build_backward(fe::graph::Graph& g, const array& q, const array& k,
                    const array& v, const array& dout,
                    const CudnnAttentionArgs& a) {
  auto tq = input(g, "Q", Q, q), tk = input(g, "K", K, k),
       tv = input(g, "V", V, v), tdo = input(g, "dO", dO, dout);
  auto dims = dims_of(q);
  auto to = g.tensor(fe::graph::Tensor_attributes()
                         .set_name("O")
                         .set_uid(O)
                         .set_dim(dims)
                         .set_stride(row_major(dims)));
  std::vector<int64_t> sdims = {dims[0], dims[1], dims[2], 1};
  auto tstats = g.tensor(fe::graph::Tensor_attributes()
                             .set_name("Stats")
                             .set_uid(Stats)
                             .set_dim(sdims)
                             .set_stride(row_major(sdims))
                             .set_data_type(fe::DataType_t::FLOAT));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_backward")
                     .set_attn_scale(a.scale);
  set_causal(options, q, k, a.causal);
  auto [dq, dk, dv] = g.sdpa_backward(tq, tk, tv, to, tdo, tstats, options);
  auto kdims = dims_of(k);
  dq->set_output(true).set_uid(dQ).set_dim(dims).set_stride(row_major(dims));
  dk->set_output(true).set_uid(dK).set_dim(kdims).set_stride(
      row_major(kdims));
  dv->set_output(true).set_uid(dV).set_dim(kdims).set_stride(
      row_major(kdims));
}

cudnn::Library* usable() {
  if (!enabled_flag()) return nullptr;
  return cudnn::library();
}

// The plan: cuDNN's first choice by heuristics mode A.
const cudnn::PlanChoice plan_choice;

} // namespace

bool cudnn_attention_available() { return usable() != nullptr; }

bool cudnn_attention_forward(const array& q, const array& k, const array& v,
                             void* out, void* stats,
                             const CudnnAttentionArgs& a, const Stream& s) {
  cudnn::Library* c = usable();
  if (!c || !cudnn_attention_fits(q, k, v, a.causal)) return false;
  bool with_stats = stats != nullptr;
  std::string key =
      graph_key(with_stats ? "fwd+stats" : "fwd", q, k, v, nullptr, a);
  std::lock_guard<std::mutex> lock(c->mutex);
  fe::graph::Graph* g = cudnn::graph_for(
      *c, key, "attention",
      [&](fe::graph::Graph& g) {
        set_types(g, q.dtype());
        build_forward(g, q, k, v, with_stats, a);
      },
      plan_choice, graphs_built);
  if (!g) return false;
  std::unordered_map<int64_t, void*> pack = {
      {Q, device_ptr(q, s)}, {K, device_ptr(k, s)}, {V, device_ptr(v, s)},
      {O, out}};
  if (with_stats) pack[Stats] = stats;
  cudnn::execute(*c, *g, pack, s, "attention");
  ++forward_calls;
  return true;
}

bool cudnn_attention_backward(const array& q, const array& k, const array& v,
                              const void* o, const array& dout,
                              const void* stats, void* dq, void* dk, void* dv,
                              const CudnnAttentionArgs& a, const Stream& s) {
  cudnn::Library* c = usable();
  if (!c || !cudnn_attention_fits(q, k, v, a.causal)) return false;
  std::string key = graph_key("bwd", q, k, v, &dout, a);
  std::lock_guard<std::mutex> lock(c->mutex);
  fe::graph::Graph* g = cudnn::graph_for(
      *c, key, "attention",
      [&](fe::graph::Graph& g) {
        set_types(g, q.dtype());
        build_backward(g, q, k, v, dout, a);
      },
      plan_choice, graphs_built);
  if (!g) return false;
  std::unordered_map<int64_t, void*> pack = {
      {Q, device_ptr(q, s)},
      {K, device_ptr(k, s)},
      {V, device_ptr(v, s)},
      {O, const_cast<void*>(o)},
      {dO, device_ptr(dout, s)},
      {Stats, const_cast<void*>(stats)},
      {dQ, dq},
      {dK, dk},
      {dV, dv}};
  cudnn::execute(*c, *g, pack, s, "attention");
  ++backward_calls;
  return true;
}

#endif

} // namespace kiln::cuda
