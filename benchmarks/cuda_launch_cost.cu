// What a kernel launch costs the host: 40 tiny dependent kernels launched
// one by one (cuLaunchKernel, cudaLaunchKernel) against the same chain as a
// CUDA graph (built and instantiated, replayed, its nodes' parameters
// patched, rebuilt and updated). Medians of repeated runs, in microseconds.
// Build and run on a GPU machine:
//   nvcc -O2 -arch=sm_90 benchmarks/cuda_launch_cost.cu -o /tmp/launch_cost \
//     -lcuda && /tmp/launch_cost
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Any failure ends the run: a figure from a failed call means nothing.
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(CUresult e, const char* what) {
  if (e != CUDA_SUCCESS) {
    const char* msg = "?";
    cuGetErrorString(e, &msg);
    std::fprintf(stderr, "%s: %s\n", what, msg);
    std::exit(1);
  }
}

// The parameters of kiln's general unary kernel (a layout by value).
struct Layout {
  int ndim;
  int shape[8];
  long long strides[3][8];
};

__global__ void unary(const float* in, float* out, long long n, Layout l) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = sinf(in[i]);
}

using Clock = std::chrono::steady_clock;
double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int K = 40; // kernels in the chain

struct Chain {
  cudaStream_t stream;
  CUfunction f;
  std::vector<float*> bufs = std::vector<float*>(K + 1);
  long long n = 1;
  Layout layout{};

  // The kernel parameters of link k, reading buffer (k + shift) % (K + 1).
  struct Args {
    void* ptrs[4];
  };
  Args args(int k, int shift) {
    return {{&bufs[(k + shift) % (K + 1)], &bufs[k + 1], &n, &layout}};
  }
};

CUDA_KERNEL_NODE_PARAMS node_params(CUfunction f, void** args) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = f;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 256;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

// Median host time of enqueue() and of enqueue() until the stream is idle.
template <typename Enqueue>
void time_enqueue(const char* name, int iters, cudaStream_t s,
                  Enqueue enqueue) {
  std::vector<double> queued, done;
  for (int it = 0; it < iters; ++it) {
    auto t0 = Clock::now();
    enqueue(it);
    auto t1 = Clock::now();
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    auto t2 = Clock::now();
    queued.push_back(us(t0, t1));
    done.push_back(us(t0, t2));
  }
  std::printf("%s: enqueue %.1f us, to completion %.1f us\n", name,
              median(queued), median(done));
}

// A graph of the chain (each node after the one before).
void build(Chain& c, cudaGraph_t& g, std::vector<CUgraphNode>& nodes,
           int shift) {
  check(cudaGraphCreate(&g, 0), "cudaGraphCreate");
  nodes.resize(K);
  for (int k = 0; k < K; ++k) {
    auto a = c.args(k, shift);
    CUDA_KERNEL_NODE_PARAMS p = node_params(c.f, a.ptrs);
    check(cuGraphAddKernelNode(&nodes[k], reinterpret_cast<CUgraph>(g),
                               k ? &nodes[k - 1] : nullptr, k ? 1 : 0, &p),
          "cuGraphAddKernelNode");
  }
}

} // namespace

int main() {
  check(cudaFree(0), "cudaFree");
  Chain c;
  check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking),
        "cudaStreamCreate");
  for (auto& b : c.bufs) check(cudaMalloc(&b, 256), "cudaMalloc");
  check(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&c.f),
                            reinterpret_cast<const void*>(unary)),
        "cudaGetFuncBySymbol");
  cudaStream_t s = c.stream;

  for (int rep = 0; rep < 3; ++rep) {
    time_enqueue("direct cuLaunchKernel x40", 200, s, [&](int) {
      for (int k = 0; k < K; ++k) {
        auto a = c.args(k, 0);
        check(cuLaunchKernel(c.f, 1, 1, 1, 256, 1, 1, 0, s, a.ptrs, nullptr),
              "cuLaunchKernel");
      }
    });
  }
  time_enqueue("direct cudaLaunchKernel x40", 200, s, [&](int) {
    for (int k = 0; k < K; ++k) {
      auto a = c.args(k, 0);
      check(cudaLaunchKernel(reinterpret_cast<const void*>(unary), 1, 256,
                             a.ptrs, 0, s),
            "cudaLaunchKernel");
    }
  });

  cudaGraph_t g;
  std::vector<CUgraphNode> nodes;
  {
    std::vector<double> built, made, ran;
    for (int it = 0; it < 50; ++it) {
      auto t0 = Clock::now();
      build(c, g, nodes, 0);
      auto t1 = Clock::now();
      cudaGraphExec_t e;
      check(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
      auto t2 = Clock::now();
      check(cudaGraphLaunch(e, s), "cudaGraphLaunch");
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      auto t3 = Clock::now();
      built.push_back(us(t0, t1));
      made.push_back(us(t1, t2));
      ran.push_back(us(t2, t3));
      check(cudaGraphExecDestroy(e), "cudaGraphExecDestroy");
      check(cudaGraphDestroy(g), "cudaGraphDestroy");
    }
    std::printf("graph x40: build %.1f us, instantiate %.1f us, "
                "launch+sync %.1f us\n",
                median(built), median(made), median(ran));
  }

  build(c, g, nodes, 0);
  cudaGraphExec_t e;
  check(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
  time_enqueue("graph replay x40", 200, s, [&](int) {
    check(cudaGraphLaunch(e, s), "cudaGraphLaunch");
  });
  // Patching every node's parameters (new buffers each time), then the
  // launch: what kiln's launch queue does on a cache hit (the patching is
  // this enqueue time less the replay's).
  time_enqueue("graph setparams + launch x40", 200, s, [&](int it) {
    for (int k = 0; k < K; ++k) {
      auto a = c.args(k, it);
      CUDA_KERNEL_NODE_PARAMS p = node_params(c.f, a.ptrs);
      check(cuGraphExecKernelNodeSetParams(reinterpret_cast<CUgraphExec>(e),
                                           nodes[k], &p),
            "cuGraphExecKernelNodeSetParams");
    }
    check(cudaGraphLaunch(e, s), "cudaGraphLaunch");
  });
  // Building a new graph and updating the executable one from it.
  time_enqueue("graph rebuild + update + launch x40", 200, s, [&](int it) {
    cudaGraph_t g2;
    std::vector<CUgraphNode> n2;
    build(c, g2, n2, it);
    cudaGraphExecUpdateResultInfo info;
    check(cudaGraphExecUpdate(e, g2, &info), "cudaGraphExecUpdate");
    check(cudaGraphLaunch(e, s), "cudaGraphLaunch");
    check(cudaGraphDestroy(g2), "cudaGraphDestroy");
  });

  time_enqueue("idle stream sync", 200, s, [](int) {});
  time_enqueue("one launch", 200, s, [&](int) {
    auto a = c.args(0, 0);
    check(cuLaunchKernel(c.f, 1, 1, 1, 256, 1, 1, 0, s, a.ptrs, nullptr),
          "cuLaunchKernel");
  });
  return 0;
}
