// GPU time per kernel of a chain of 40 tiny dependent kernels captured as a
// CUDA graph: plain edges against programmatic ones (Hopper's programmatic
// dependent launch, which the launch queue uses for kernels that declare a
// GridDependency), in blocks of 256 and 32 threads. Medians of 60 replays,
// timed with events. Build and run on a GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 benchmarks/cuda_graph_edges.cu \
//     -o /tmp/graph_edges && /tmp/graph_edges
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Wait: griddepcontrol.wait first (what GridDependency's constructor
// does); Trigger: griddepcontrol.launch_dependents at the end too.
template <bool Wait, bool Trigger>
__global__ void tiny(const float* in, float* out, long long n) {
  if constexpr (Wait) asm volatile("griddepcontrol.wait;" ::: "memory");
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = sinf(in[i]) + 1.0f;
  if constexpr (Trigger) asm volatile("griddepcontrol.launch_dependents;");
}

using Kernel = void (*)(const float*, float*, long long);

void run(const char* name, Kernel k, bool programmatic, int threads,
         float* a, float* b) {
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cudaGraph_t g;
  cudaGraphExec_t exec;
  // Capturing launches with programmatic stream serialization gives the
  // graph programmatic edges.
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
        "begin capture");
  for (int i = 0; i < 40; ++i) {
    cudaLaunchConfig_t c = {};
    c.gridDim = 1;
    c.blockDim = threads;
    c.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = at;
    c.numAttrs = programmatic ? 1 : 0;
    const float* in = (i % 2) ? b : a;
    float* out = (i % 2) ? a : b;
    check(cudaLaunchKernelEx(&c, k, in, out, 1ll), "cudaLaunchKernelEx");
  }
  check(cudaStreamEndCapture(s, &g), "end capture");
  check(cudaGraphInstantiate(&exec, g, 0), "instantiate");
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  std::vector<float> ts;
  for (int r = 0; r < 60; ++r) {
    check(cudaEventRecord(e0, s), "record");
    check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    check(cudaEventRecord(e1, s), "record");
    check(cudaEventSynchronize(e1), "synchronize");
    float ms;
    check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    ts.push_back(ms * 1000);
  }
  std::sort(ts.begin(), ts.end());
  std::printf("%-28s %3d threads: 40 kernels %6.1f us (%.2f us each)\n",
              name, threads, ts[ts.size() / 2], ts[ts.size() / 2] / 40);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

} // namespace

int main() {
  float *a, *b;
  check(cudaMalloc(&a, 1024), "cudaMalloc");
  check(cudaMalloc(&b, 1024), "cudaMalloc");
  check(cudaMemset(a, 0, 1024), "cudaMemset");
  check(cudaMemset(b, 0, 1024), "cudaMemset");
  for (int t : {256, 32}) {
    run("plain edges", tiny<false, false>, false, t, a, b);
    run("wait, plain edges", tiny<true, false>, false, t, a, b);
    run("wait, programmatic edges", tiny<true, false>, true, t, a, b);
    run("wait+trigger, programmatic", tiny<true, true>, true, t, a, b);
  }
  return 0;
}
