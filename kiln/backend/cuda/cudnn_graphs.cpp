// cuDNN's library, handle and graph cache (cudnn_graphs.h), shared by
// cudnn_attention.cpp and cudnn_conv.cpp.
#include "kiln/backend/cuda/cudnn_graphs.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/core/env.h"

// cudnn-frontend's dynamic loading reaches every cuDNN function through
// this handle (dlsym); kiln owns and sets it.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend

namespace kiln::cuda::cudnn {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The cuDNN library: KILN_CUDNN_LIBRARY when set (a path; the Python
// package sets it to the nvidia-cudnn wheel's copy when there is one), else
// the system's libcudnn.so.9. Null when neither loads or it predates 9.0.
void* load_library() {
  std::vector<std::string> names;
  if (const char* path = std::getenv("KILN_CUDNN_LIBRARY")) {
    names.push_back(path);
  }
  names.push_back("libcudnn.so.9");
  names.push_back("libcudnn_graph.so.9");
  auto t = Clock::now();
  for (const auto& name : names) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    using GetVersion = size_t (*)();
    auto get_version =
        reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
    if (get_version && get_version() >= 90000) {
      if (debug_enabled()) {
        std::cerr << "[kiln] cuDNN " << get_version() << " from " << name
                  << ", loaded in " << ms_since(t) << " ms\n";
      }
      return h;
    }
    dlclose(h);
  }
  if (debug_enabled()) {
    std::cerr << "[kiln] no cuDNN 9 found: attention and convolution run "
                 "kiln's kernels\n";
  }
  return nullptr;
}

} // namespace

bool GraphCache::find(const std::string& key, GraphPtr& g) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  order_.splice(order_.begin(), order_, it->second);
  g = it->second->second;
  return true;
}

void GraphCache::insert(const std::string& key, GraphPtr g) {
  order_.emplace_front(key, std::move(g));
  index_[key] = order_.begin();
  if (order_.size() > capacity) {
    index_.erase(order_.back().first);
    order_.pop_back();
  }
}

bool debug_enabled() { return env::debug_level() >= 1; }

Library* library() {
  static Library* lib = []() -> Library* {
    if (device_count() == 0 || device_info().major < 8) return nullptr;
    void* h = load_library();
    if (!h) return nullptr;
    fe::cudnn_dlhandle = h;
    auto* lib = new Library;
    try {
      set_current_device();
      auto t = Clock::now();
      if (fe::detail::create_handle(&lib->handle) != CUDNN_STATUS_SUCCESS) {
        throw std::runtime_error("cudnnCreate failed");
      }
      if (debug_enabled()) {
        std::cerr << "[kiln] cudnnCreate: " << ms_since(t) << " ms\n";
      }
    } catch (const std::exception& e) {
      if (debug_enabled()) std::cerr << "[kiln] cuDNN: " << e.what() << "\n";
      delete lib;
      return nullptr;
    }
    return lib;
  }();
  return lib;
}

fe::graph::Graph* graph_for(Library& lib, const std::string& key,
                            const char* what,
                            const std::function<void(fe::graph::Graph&)>& build,
                            const PlanChoice& choice,
                            std::atomic<int64_t>& built) {
  GraphPtr g;
  if (lib.graphs.find(key, g)) return g.get();
  g = std::make_shared<fe::graph::Graph>();
  std::string why;
  // Graph::build's steps one by one, so KILN_DEBUG can say where a first
  // call's time goes (a new graph takes tens to hundreds of milliseconds),
  // with the engines `choice` leaves out dropped before the support check.
  double ms[4] = {};
  try {
    build(*g);
    auto t = Clock::now();
    auto lap = [&](int i) {
      ms[i] = ms_since(t);
      t = Clock::now();
    };
    fe::error_t st = g->validate();
    if (st.is_good()) st = g->build_operation_graph(lib.handle);
    lap(0);
    if (st.is_good()) st = g->create_execution_plans(choice.heuristics);
    if (st.is_good() && !choice.deselect.empty()) {
      g->deselect_numeric_notes(choice.deselect);
    }
    lap(1);
    if (st.is_good()) st = g->check_support();
    lap(2);
    if (st.is_good()) {
      st = g->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
    }
    lap(3);
    if (!st.is_good()) why = st.get_message();
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (debug_enabled()) {
    std::cerr << "[kiln] cuDNN " << what << " graph " << key
              << ": operation graph " << ms[0] << " ms, heuristics " << ms[1]
              << " ms, support " << ms[2] << " ms, plan " << ms[3] << " ms\n";
  }
  if (!why.empty()) {
    if (debug_enabled()) {
      std::cerr << "[kiln] cuDNN declines " << what << " " << key << ": "
                << why << "\n";
    }
    g.reset();
  } else {
    ++built;
  }
  lib.graphs.insert(key, g);
  return g.get();
}

void execute(Library& lib, fe::graph::Graph& g,
             std::unordered_map<int64_t, void*>& pack, const Stream& s,
             const char* what) {
  int64_t workspace_bytes = 0;
  auto st = g.get_workspace_size(workspace_bytes);
  if (!st.is_good()) {
    throw std::runtime_error(std::string("[cuDNN ") + what +
                             "] workspace size: " + st.get_message());
  }
  cudaStream_t stream = cuda_stream(s);
  Scratch workspace(static_cast<size_t>(workspace_bytes), s);
  if (fe::detail::set_stream(lib.handle, stream) != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("[cuDNN ") + what +
                             "] cudnnSetStream failed");
  }
  st = g.execute(lib.handle, pack, workspace.ptr);
  if (!st.is_good()) {
    throw std::runtime_error(std::string("[cuDNN ") + what +
                             "] execute: " + st.get_message());
  }
}

} // namespace kiln::cuda::cudnn
