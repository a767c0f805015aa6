// What cuDNN's users in kiln (attention, convolution) share: the library,
// loaded at run time (dlopen) and never linked, one handle, and the most
// recently used cudnn-frontend graphs by key, each built at first use.
// Only compiled where cudnn-frontend's headers are (KILN_HAS_CUDNN_FRONTEND).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cudnn_frontend.h>

#include "kiln/core/device.h"

namespace kiln::cuda::cudnn {

namespace fe = cudnn_frontend;

using GraphPtr = std::shared_ptr<fe::graph::Graph>;

/** The most recently used graphs by key, at most `capacity` (a graph holds
 *  its execution plan; a new shape builds a new one, so a run of many
 *  shapes must not keep them all). A null graph records a decline. */
class GraphCache {
 public:
  static constexpr size_t capacity = 128;
  /** The cached entry for key, marked most recent; false when absent. */
  bool find(const std::string& key, GraphPtr& g);
  void insert(const std::string& key, GraphPtr g);

 private:
  using Entry = std::pair<std::string, GraphPtr>;
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

/** The loaded library and its handle. The mutex guards the handle's
 *  stream, set per call, and the graph cache. */
struct Library {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
  GraphCache graphs;
};

/** The library, loaded and its handle created at the first call: cuDNN 9
 *  or newer from KILN_CUDNN_LIBRARY (a path) or the loader's path, on a GPU
 *  of compute capability 8.0 or newer; null otherwise. */
Library* library();

/** KILN_DEBUG is set: say what cuDNN builds, declines and costs. */
bool debug_enabled();

/** How a graph's execution plan is chosen: the heuristics asked, and the
 *  engines left out by their numerical notes (reduced-precision sums,
 *  TF32, nondeterminism). */
struct PlanChoice {
  std::vector<fe::HeurMode_t> heuristics = {fe::HeurMode_t::A};
  std::vector<fe::NumericalNote_t> deselect;
};

/** The cached graph for key, built by `build` (operands and operations)
 *  with a plan chosen as `choice` says at first use, adding one to `built`;
 *  null when cuDNN declines it (remembered too). `what` names the user in
 *  KILN_DEBUG's lines. Called with lib.mutex held. */
fe::graph::Graph* graph_for(Library& lib, const std::string& key,
                            const char* what,
                            const std::function<void(fe::graph::Graph&)>& build,
                            const PlanChoice& choice,
                            std::atomic<int64_t>& built);

/** Runs g with this call's pointers (pack: uid -> pointer) on s, its
 *  workspace from kiln's allocator (lib.mutex held). Throws, naming
 *  `what`, when cuDNN fails. */
void execute(Library& lib, fe::graph::Graph& g,
             std::unordered_map<int64_t, void*>& pack, const Stream& s,
             const char* what);

} // namespace kiln::cuda::cudnn
