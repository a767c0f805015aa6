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

#if KILN_HAS_CUDNN_FRONTEND
#include <dlfcn.h>

#include <chrono>
#include <iostream>
#include <list>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include "kiln/backend/cuda/buffer.h"

// cudnn-frontend's dynamic loading reaches every cuDNN function through
// this handle (dlsym); kiln owns and sets it.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend
#endif

namespace kiln::cuda {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> enabled{[] {
    const char* v = std::getenv("KILN_CUDNN_ATTENTION");
    return !(v && std::strcmp(v, "0") == 0);
  }()};
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

bool debug_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_DEBUG");
    return v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

// The cuDNN library: KILN_CUDNN_LIBRARY when set (a path; the Python
// package sets it to the nvidia-cudnn wheel's copy when there is one), else
// the system's libcudnn.so.9. Null when neither loads or it predates 9.0.
void* load_cudnn() {
  std::vector<std::string> names;
  if (const char* path = std::getenv("KILN_CUDNN_LIBRARY")) {
    names.push_back(path);
  }
  names.push_back("libcudnn.so.9");
  names.push_back("libcudnn_graph.so.9");
  auto t = std::chrono::steady_clock::now();
  for (const auto& name : names) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    using GetVersion = size_t (*)();
    auto get_version = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
    if (get_version && get_version() >= 90000) {
      if (debug_enabled()) {
        std::cerr << "[kiln] cuDNN " << get_version() << " from " << name
                  << " for attention, loaded in "
                  << std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - t)
                         .count()
                  << " ms\n";
      }
      return h;
    }
    dlclose(h);
  }
  if (debug_enabled()) {
    std::cerr << "[kiln] no cuDNN 9 found: attention runs kiln's kernels\n";
  }
  return nullptr;
}

using GraphPtr = std::shared_ptr<fe::graph::Graph>;

// The most recently used graphs by key, at most `capacity` (a graph holds
// its execution plan; a new length builds a new one, so a run of many
// lengths must not keep them all).
class GraphCache {
 public:
  static constexpr size_t capacity = 64;
  // The cached entry for key, marked most recent; false when absent.
  bool find(const std::string& key, GraphPtr& g) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    order_.splice(order_.begin(), order_, it->second);
    g = it->second->second;
    return true;
  }
  void insert(const std::string& key, GraphPtr g) {
    order_.emplace_front(key, std::move(g));
    index_[key] = order_.begin();
    if (order_.size() > capacity) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  std::list<std::pair<std::string, GraphPtr>> order_;
  std::unordered_map<std::string,
                     std::list<std::pair<std::string, GraphPtr>>::iterator>
      index_;
};

// The loaded library and its handle, created once. The handle's stream is
// set per call under the mutex, which also guards the graph cache.
struct Cudnn {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
  GraphCache graphs;
};

Cudnn* cudnn() {
  static Cudnn* c = []() -> Cudnn* {
    if (device_count() == 0 || device_info().major < 8) return nullptr;
    void* lib = load_cudnn();
    if (!lib) return nullptr;
    fe::cudnn_dlhandle = lib;
    auto* c = new Cudnn;
    try {
      set_current_device();
      auto t = std::chrono::steady_clock::now();
      if (fe::detail::create_handle(&c->handle) != CUDNN_STATUS_SUCCESS) {
        throw std::runtime_error("cudnnCreate failed");
      }
      if (debug_enabled()) {
        std::cerr << "[kiln] cudnnCreate: "
                  << std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - t)
                         .count()
                  << " ms\n";
      }
    } catch (const std::exception& e) {
      if (debug_enabled()) std::cerr << "[kiln] cuDNN: " << e.what() << "\n";
      delete c;
      return nullptr;
    }
    return c;
  }();
  return c;
}

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

std::shared_ptr<fe::graph::Graph> new_graph(Dtype dt) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io_type(dt))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
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

// The cached graph for key, built by `build` at first use; null when cuDNN
// declines it (remembered too). Called with c.mutex held.
template <typename Build>
fe::graph::Graph* graph_for(Cudnn& c, const std::string& key, Dtype dt,
                            Build&& build) {
  GraphPtr g;
  if (c.graphs.find(key, g)) return g.get();
  g = new_graph(dt);
  std::string why;
  // Graph::build's steps one by one, so KILN_DEBUG can say where a first
  // call's time goes (a new graph takes tens to hundreds of milliseconds).
  using Clock = std::chrono::steady_clock;
  double ms[4] = {};
  try {
    build(*g);
    auto t = Clock::now();
    auto lap = [&](int i) {
      auto now = Clock::now();
      ms[i] = std::chrono::duration<double, std::milli>(now - t).count();
      t = now;
    };
    fe::error_t st = g->validate();
    if (st.is_good()) st = g->build_operation_graph(c.handle);
    lap(0);
    if (st.is_good()) st = g->create_execution_plans({fe::HeurMode_t::A});
    lap(1);
    if (st.is_good()) st = g->check_support();
    lap(2);
    if (st.is_good()) st = g->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
    lap(3);
    if (!st.is_good()) why = st.get_message();
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (debug_enabled()) {
    std::cerr << "[kiln] cuDNN attention graph " << key << ": operation graph "
              << ms[0] << " ms, heuristics " << ms[1] << " ms, support "
              << ms[2] << " ms, plan " << ms[3] << " ms\n";
  }
  if (!why.empty()) {
    if (debug_enabled()) {
      std::cerr << "[kiln] cuDNN declines attention " << key << ": " << why
                << "\n";
    }
    g.reset();
  } else {
    ++graphs_built;
  }
  c.graphs.insert(key, g);
  return g.get();
}

// Runs g with pack on s (the caller holds c.mutex).
void execute(Cudnn& c, fe::graph::Graph& g,
             std::unordered_map<int64_t, void*>& pack, const Stream& s) {
  int64_t workspace_bytes = 0;
  auto st = g.get_workspace_size(workspace_bytes);
  if (!st.is_good()) {
    throw std::runtime_error("[cuDNN attention] workspace size: " +
                             st.get_message());
  }
  cudaStream_t stream = cuda_stream(s);
  Scratch workspace(static_cast<size_t>(workspace_bytes), s);
  if (fe::detail::set_stream(c.handle, stream) != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error("[cuDNN attention] cudnnSetStream failed");
  }
  st = g.execute(c.handle, pack, workspace.ptr);
  if (!st.is_good()) {
    throw std::runtime_error("[cuDNN attention] execute: " + st.get_message());
  }
}

Cudnn* usable() {
  if (!enabled_flag()) return nullptr;
  return cudnn();
}

} // namespace

bool cudnn_attention_available() { return usable() != nullptr; }

bool cudnn_attention_forward(const array& q, const array& k, const array& v,
                             void* out, void* stats,
                             const CudnnAttentionArgs& a, const Stream& s) {
  Cudnn* c = usable();
  if (!c || !cudnn_attention_fits(q, k, v, a.causal)) return false;
  bool with_stats = stats != nullptr;
  std::string key =
      graph_key(with_stats ? "fwd+stats" : "fwd", q, k, v, nullptr, a);
  std::lock_guard<std::mutex> lock(c->mutex);
  fe::graph::Graph* g = graph_for(*c, key, q.dtype(), [&](auto& g) {
    build_forward(g, q, k, v, with_stats, a);
  });
  if (!g) return false;
  std::unordered_map<int64_t, void*> pack = {
      {Q, device_ptr(q, s)}, {K, device_ptr(k, s)}, {V, device_ptr(v, s)},
      {O, out}};
  if (with_stats) pack[Stats] = stats;
  execute(*c, *g, pack, s);
  ++forward_calls;
  return true;
}

bool cudnn_attention_backward(const array& q, const array& k, const array& v,
                              const void* o, const array& dout,
                              const void* stats, void* dq, void* dk, void* dv,
                              const CudnnAttentionArgs& a, const Stream& s) {
  Cudnn* c = usable();
  if (!c || !cudnn_attention_fits(q, k, v, a.causal)) return false;
  std::string key = graph_key("bwd", q, k, v, &dout, a);
  std::lock_guard<std::mutex> lock(c->mutex);
  fe::graph::Graph* g = graph_for(*c, key, q.dtype(), [&](auto& g) {
    build_backward(g, q, k, v, dout, a);
  });
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
  execute(*c, *g, pack, s);
  ++backward_calls;
  return true;
}

#endif

} // namespace kiln::cuda
