#include "kiln/backend/cuda/launch_queue.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/env.h"
#include "kiln/core/profile.h"

namespace kiln::cuda {

namespace {

// The graph calls, found like the rest of the driver API (utils.h). Graphs
// are off where any is missing: cuFuncGetParamInfo, which tells how many
// bytes of parameters to copy, needs a CUDA 12.4 driver.
struct GraphApi {
  decltype(&::cuFuncGetParamInfo) param_info = nullptr;
  decltype(&::cuGraphCreate) create = nullptr;
  decltype(&::cuGraphAddKernelNode) add_kernel_node = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) instantiate = nullptr;
  decltype(&::cuGraphExecKernelNodeSetParams) set_params = nullptr;
  decltype(&::cuGraphLaunch) launch = nullptr;
  decltype(&::cuGraphExecDestroy) exec_destroy = nullptr;
  decltype(&::cuGraphDestroy) destroy = nullptr;
  bool complete = false;
  // Edges with data (programmatic ones): a CUDA 12.3 driver; plain edges
  // where it is missing.
  decltype(&::cuGraphAddDependencies) add_dependencies = nullptr;
};

template <typename F>
bool find(const char* name, int version, F& f) {
  f = reinterpret_cast<F>(driver_entry(name, version));
  return f != nullptr;
}

const GraphApi& graph_api() {
  static const GraphApi api = [] {
    GraphApi g;
    g.complete = find("cuFuncGetParamInfo", 12040, g.param_info) &&
                 find("cuGraphCreate", 12000, g.create) &&
                 find("cuGraphAddKernelNode", 12000, g.add_kernel_node) &&
                 find("cuGraphInstantiateWithFlags", 12000, g.instantiate) &&
                 find("cuGraphExecKernelNodeSetParams", 12000,
                      g.set_params) &&
                 find("cuGraphLaunch", 12000, g.launch) &&
                 find("cuGraphExecDestroy", 12000, g.exec_destroy) &&
                 find("cuGraphDestroy", 12000, g.destroy);
    find("cuGraphAddDependencies", 12030, g.add_dependencies);
    return g;
  }();
  return api;
}

// A record is sent as a graph once it holds `limit` kernels: first_batch
// after the stream was handed out (synchronized, or given other work), then
// twice as many each time up to max_batch (MLX commits its graphs at 100
// ops on Hopper). The first graph of a chain then reaches an idle GPU
// early and runs while the host records the next: 40 tiny kernels take
// about 40 us on the GPU even in a graph. A record of fewer than min_graph
// kernels goes out launch by launch, as patching a cached graph costs about
// what a few launches do. Executable graphs are kept for max_graphs kernel
// sequences.
constexpr size_t first_batch = 8;
constexpr size_t max_batch = 64;
constexpr size_t min_graph = 4;
constexpr size_t max_graphs = 256;

// Where each parameter of a kernel lies in its packed parameter block.
struct ParamLayout {
  std::vector<uint32_t> offsets, sizes;
  uint32_t bytes = 0;
};

struct Recorded {
  CUfunction f;
  LaunchShape shape;
  uint32_t at; // its parameter block's offset in Queue::data
  const ParamLayout* params;
};

struct Queue {
  std::vector<Recorded> items;
  std::vector<char> data;
  size_t limit = first_batch;
};

struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<CUgraphNode> nodes;
  std::vector<char> data; // the parameters it holds now, laid out as a Queue
  uint64_t last_use = 0;
};

struct State {
  std::mutex mutex;
  std::unordered_map<CUfunction, ParamLayout> layouts;
  std::vector<Queue> queues; // by kiln stream index
  std::unordered_map<std::string, Graph> graphs;
  uint64_t clock = 0;
  LaunchStats stats;
};

State& state() {
  static State* s = new State; // outlives static destructors
  return *s;
}

bool env_allows_graphs() {
  return env::flag("KILN_CUDA_GRAPHS", true);
}

void launch_now(CUfunction f, const LaunchShape& s, KernelArgs args,
                cudaStream_t stream) {
  kiln::detail::HostTimer timer("cuda: launch a kernel");
  KILN_CHECK_CU(driver().launch_kernel(
      f, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2],
      s.shared_bytes, stream, args.ptr, nullptr));
}

// Where the driver puts each of f's first `count` parameters. Asking past
// the last parameter is refused (and reported by compute-sanitizer as an
// API error), so launch sites pass the exact count; a launch passing more
// values than f takes is a bug in kiln, caught here.
const ParamLayout& layout_of(State& st, CUfunction f, unsigned count) {
  auto it = st.layouts.find(f);
  if (it == st.layouts.end()) {
    ParamLayout l;
    for (unsigned i = 0; i < count; ++i) {
      size_t offset = 0, size = 0;
      if (graph_api().param_info(f, i, &offset, &size) != CUDA_SUCCESS) {
        throw std::logic_error(
            "kiln internal error: a kernel launch passed " +
            std::to_string(count) + " arguments to a kernel of " +
            std::to_string(i) + " parameters");
      }
      l.offsets.push_back(static_cast<uint32_t>(offset));
      l.sizes.push_back(static_cast<uint32_t>(size));
      l.bytes =
          std::max<uint32_t>(l.bytes, static_cast<uint32_t>(offset + size));
    }
    it = st.layouts.emplace(f, std::move(l)).first;
  }
  if (it->second.offsets.size() != count) {
    throw std::logic_error(
        "kiln internal error: launches of one kernel passed " +
        std::to_string(it->second.offsets.size()) + " and " +
        std::to_string(count) + " arguments");
  }
  return it->second;
}

// Pointers to each parameter of item r inside `data` (as kernelParams).
void param_pointers(const Recorded& r, char* data, std::vector<void*>& out) {
  out.clear();
  for (uint32_t o : r.params->offsets) out.push_back(data + r.at + o);
}

CUDA_KERNEL_NODE_PARAMS node_params(const Recorded& r, void** args) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = r.f;
  p.gridDimX = r.shape.grid[0];
  p.gridDimY = r.shape.grid[1];
  p.gridDimZ = r.shape.grid[2];
  p.blockDimX = r.shape.block[0];
  p.blockDimY = r.shape.block[1];
  p.blockDimZ = r.shape.block[2];
  p.sharedMemBytes = r.shape.shared_bytes;
  p.kernelParams = args;
  return p;
}

// The kernel sequence of a record: what a cached graph must match.
std::string sequence_key(int stream, const Queue& q) {
  std::string key(reinterpret_cast<const char*>(&stream), sizeof(stream));
  key.reserve(sizeof(stream) + q.items.size() * (sizeof(CUfunction) +
                                                 sizeof(LaunchShape)));
  for (auto& r : q.items) {
    key.append(reinterpret_cast<const char*>(&r.f), sizeof(r.f));
    key.append(reinterpret_cast<const char*>(&r.shape), sizeof(r.shape));
  }
  return key;
}

void evict_oldest(State& st) {
  auto oldest = st.graphs.begin();
  for (auto it = st.graphs.begin(); it != st.graphs.end(); ++it) {
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  }
  // A graph still running is freed when it completes (cuGraphExecDestroy).
  graph_api().exec_destroy(oldest->second.exec);
  graph_api().destroy(oldest->second.graph);
  st.graphs.erase(oldest);
}

// Builds the executable graph of q (its kernels in a chain, as a stream
// orders them); false, leaving nothing behind, when the driver refuses.
// A kernel that declares a GridDependency follows its predecessor through
// a programmatic edge on Hopper and later (the dependency's griddepcontrol
// is compiled for sm_90 up): it may start while that one ends.
bool build_graph(State& st, const Queue& q, Graph& g) {
  auto& api = graph_api();
  static const bool hopper = device_info().major >= 9;
  if (api.create(&g.graph, 0) != CUDA_SUCCESS) return false;
  g.data = q.data;
  std::vector<void*> args;
  int programmatic = 0;
  for (auto& r : q.items) {
    param_pointers(r, g.data.data(), args);
    CUDA_KERNEL_NODE_PARAMS p = node_params(r, args.data());
    CUgraphNode node;
    CUgraphNode* dep = g.nodes.empty() ? nullptr : &g.nodes.back();
    bool early =
        hopper && dep && r.shape.programmatic && api.add_dependencies;
    bool added = api.add_kernel_node(&node, g.graph, early ? nullptr : dep,
                                     dep && !early ? 1 : 0,
                                     &p) == CUDA_SUCCESS;
    if (added && early) {
      CUgraphEdgeData edge{};
      edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
      edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
      if (api.add_dependencies(g.graph, dep, &node, &edge, 1) ==
          CUDA_SUCCESS) {
        ++programmatic;
      } else {
        added = api.add_dependencies(g.graph, dep, &node, nullptr, 1) ==
                CUDA_SUCCESS;
      }
    }
    if (!added) {
      api.destroy(g.graph);
      return false;
    }
    g.nodes.push_back(node);
  }
  if (api.instantiate(&g.exec, g.graph, 0) != CUDA_SUCCESS) {
    api.destroy(g.graph);
    return false;
  }
  st.stats.programmatic += programmatic;
  return true;
}

// Points the cached graph g at q's parameters where they changed.
void update_graph(State& st, const Queue& q, Graph& g) {
  if (std::memcmp(q.data.data(), g.data.data(), q.data.size()) == 0) return;
  std::vector<void*> args;
  for (size_t k = 0; k < q.items.size(); ++k) {
    const Recorded& r = q.items[k];
    const char* now = q.data.data() + r.at;
    char* held = g.data.data() + r.at;
    if (std::memcmp(now, held, r.params->bytes) == 0) continue;
    std::memcpy(held, now, r.params->bytes);
    kiln::detail::HostTimer timer("cuda: patch a graph node");
    ++st.stats.patched;
    param_pointers(r, g.data.data(), args);
    CUDA_KERNEL_NODE_PARAMS p = node_params(r, args.data());
    KILN_CHECK_CU(graph_api().set_params(g.exec, g.nodes[k], &p));
  }
}

// Sends stream's record; `full` when it reached its limit (the next may be
// longer), else the stream is wanted by other work and starts over short.
void flush_locked(State& st, int stream, bool full = false) {
  if (stream < 0 || static_cast<size_t>(stream) >= st.queues.size()) return;
  Queue q;
  std::swap(q, st.queues[stream]);
  st.queues[stream].limit =
      full ? std::min(q.limit * 2, max_batch) : first_batch;
  if (q.items.empty()) return;
  cudaStream_t cs = raw_stream(stream);
  auto one_by_one = [&] {
    std::vector<void*> args;
    for (auto& r : q.items) {
      param_pointers(r, q.data.data(), args);
      launch_now(r.f, r.shape, args, cs);
    }
    st.stats.direct += static_cast<int64_t>(q.items.size());
  };
  if (q.items.size() < min_graph) {
    one_by_one();
    return;
  }
  kiln::detail::HostTimer timer("cuda: send a graph");
  std::string key = sequence_key(stream, q);
  auto it = st.graphs.find(key);
  if (it == st.graphs.end()) {
    Graph g;
    if (!build_graph(st, q, g)) {
      one_by_one();
      return;
    }
    if (st.graphs.size() >= max_graphs) evict_oldest(st);
    it = st.graphs.emplace(std::move(key), std::move(g)).first;
    ++st.stats.instantiated;
  } else {
    update_graph(st, q, it->second);
  }
  it->second.last_use = ++st.clock;
  KILN_CHECK_CU(graph_api().launch(it->second.exec, cs));
  ++st.stats.graphs;
  st.stats.in_graphs += static_cast<int64_t>(q.items.size());
  // Give the buffers back for the next record (they keep their capacity).
  q.items.clear();
  q.data.clear();
  q.limit = st.queues[stream].limit;
  std::swap(q, st.queues[stream]);
}

} // namespace

bool graphs_enabled() {
  static const bool on = env_allows_graphs() && graph_api().complete;
  return on;
}

void submit_kernel(CUfunction f, const LaunchShape& shape, KernelArgs args,
                   int stream) {
  kiln::detail::HostTimer timer("cuda: queue a kernel");
  set_current_device(); // the driver API needs the context on this thread
  if (!graphs_enabled() || stream < 0) {
    launch_now(f, shape, args, raw_stream(stream));
    return;
  }
  uint64_t blocks = uint64_t(shape.grid[0]) * shape.grid[1] * shape.grid[2];
  // Up to a wave of blocks: a kernel that runs about as long as its launch.
  bool small = blocks <= static_cast<uint64_t>(device_info().sm_count);
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  const ParamLayout& l = layout_of(st, f, args.count); // checks the count
  if (!small) {
    flush_locked(st, stream);
    launch_now(f, shape, args, raw_stream(stream));
    ++st.stats.direct;
    return;
  }
  if (static_cast<size_t>(stream) >= st.queues.size()) {
    st.queues.resize(stream + 1);
  }
  Queue& q = st.queues[stream];
  Recorded r{f, shape, static_cast<uint32_t>(q.data.size()), &l};
  q.data.resize(q.data.size() + l.bytes);
  for (size_t i = 0; i < l.offsets.size(); ++i) {
    std::memcpy(q.data.data() + r.at + l.offsets[i], args.ptr[i],
                l.sizes[i]);
  }
  q.items.push_back(r);
  if (q.items.size() >= q.limit) flush_locked(st, stream, true);
}

void flush_launches(int stream) {
  if (!graphs_enabled()) return;
  set_current_device(); // any thread may ask for the stream
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  flush_locked(st, stream);
}

void flush_all_launches() {
  if (!graphs_enabled()) return;
  set_current_device();
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  for (size_t i = 0; i < st.queues.size(); ++i) {
    flush_locked(st, static_cast<int>(i));
  }
}

LaunchStats launch_stats() {
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.stats;
}

} // namespace kiln::cuda
