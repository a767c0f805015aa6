// Small kernel launches go to the GPU as CUDA graphs. A driver launch costs
// the host about 3.3 us on an H200 machine, more than a tiny kernel runs, so
// a chain of small ops is bound by the host. Launches of up to a wave of
// blocks are recorded per stream instead; the record is sent as one graph
// (an executable graph cached by the kernels and shapes it holds, whose
// parameters are patched in place) when it is long enough, when a large
// kernel follows, or when anything else wants the stream: cuda_stream()
// flushes it before handing the stream out, so library calls, copies,
// events and synchronization stay in order with the kernels before them.
// KILN_CUDA_GRAPHS=0 launches every kernel at once.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::cuda {

/** A kernel's arguments as cuLaunchKernel takes them (a pointer to each
 *  value) and how many there are, which must be exactly the kernel's
 *  parameter count: the launch queue copies that many parameters. */
struct KernelArgs {
  void** ptr;
  unsigned count;
  template <size_t N>
  KernelArgs(void* (&args)[N]) : ptr(args), count(N) {}
  KernelArgs(std::vector<void*>& args)
      : ptr(args.data()), count(static_cast<unsigned>(args.size())) {}
  KernelArgs(void** args, size_t n)
      : ptr(args), count(static_cast<unsigned>(n)) {}
};

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  // Nonzero when the kernel declares a GridDependency (device/utils.cuh)
  // before touching memory: in a graph it may then start before the
  // previous kernel ends (a programmatic edge). An unsigned, not a bool,
  // so the struct has no padding: its bytes are part of graph keys.
  unsigned programmatic = 0;
};

/** Runs kernel f with `args` on kiln stream `stream`, now or recorded for a
 *  graph. The parameters are copied, so args may die when this returns.
 *  Throws std::logic_error when args holds more values than f takes (the
 *  check needs the graph API, so it runs where graphs are on). */
void submit_kernel(CUfunction f, const LaunchShape& shape, KernelArgs args,
                   int stream);

/** Sends what kiln stream `stream` has recorded to the GPU. */
void flush_launches(int stream);
/** flush_launches for every stream. */
void flush_all_launches();

/** Counts since the process started, for tests and benchmarks. */
struct LaunchStats {
  int64_t direct = 0;       // kernels launched one by one
  int64_t in_graphs = 0;    // kernels sent inside graphs
  int64_t graphs = 0;       // graph launches
  int64_t instantiated = 0; // executable graphs built (cache misses)
  int64_t patched = 0;      // kernel nodes of cached graphs given new values
  int64_t programmatic = 0; // graph edges built as programmatic ones
};
LaunchStats launch_stats();

/** Whether launches are being recorded for graphs (the driver supports it
 *  and KILN_CUDA_GRAPHS is not 0). */
bool graphs_enabled();

} // namespace kiln::cuda
