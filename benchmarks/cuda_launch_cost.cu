// Build and run on a GPU machine:
//   nvcc -O2 -arch=sm_90 benchmarks/cuda_launch_cost.cu -o /tmp/launch_cost -lcuda && /tmp/launch_cost
// Host and device cost of 40 tiny dependent kernels: direct launches vs a
// CUDA graph (rebuilt+updated, params patched, replayed).
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>

struct Layout { int ndim; int shape[8]; long long strides[3][8]; };

__global__ void unary(const float* in, float* out, long long n, Layout l) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = sinf(in[i]);
}

using clk = std::chrono::steady_clock;
double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

int main() {
  cudaFree(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const int K = 40;
  std::vector<float*> bufs(K + 1);
  for (auto& b : bufs) cudaMalloc(&b, 256);
  CUfunction f; cudaGetFuncBySymbol((cudaFunction_t*)&f, (const void*)unary);
  long long n = 1; Layout l{};
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size()/2]; };
  // (a) direct cuLaunchKernel
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<double> enq, tot;
    for (int it = 0; it < 200; ++it) {
      auto t0 = clk::now();
      for (int k = 0; k < K; ++k) {
        void* a[] = {&bufs[k], &bufs[k + 1], &n, &l};
        cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, a, nullptr);
      }
      auto t1 = clk::now();
      cudaStreamSynchronize(s);
      auto t2 = clk::now();
      enq.push_back(us(t0, t1)); tot.push_back(us(t0, t2));
    }
    printf("direct cuLaunchKernel x%d: enqueue %.1f us, to completion %.1f us\n", K, med(enq), med(tot));
  }
  // (a2) cudaLaunchKernel
  {
    std::vector<double> enq, tot;
    for (int it = 0; it < 200; ++it) {
      auto t0 = clk::now();
      for (int k = 0; k < K; ++k) {
        void* a[] = {&bufs[k], &bufs[k + 1], &n, &l};
        cudaLaunchKernel((const void*)unary, 1, 256, a, 0, s);
      }
      auto t1 = clk::now();
      cudaStreamSynchronize(s);
      auto t2 = clk::now();
      enq.push_back(us(t0, t1)); tot.push_back(us(t0, t2));
    }
    printf("direct cudaLaunchKernel x%d: enqueue %.1f us, to completion %.1f us\n", K, med(enq), med(tot));
  }
  // graph: linear chain
  auto build = [&](cudaGraph_t& g, std::vector<cudaGraphNode_t>& nodes, int shift) {
    cudaGraphCreate(&g, 0);
    nodes.resize(K);
    for (int k = 0; k < K; ++k) {
      void* a[] = {&bufs[(k + shift) % (K + 1)], &bufs[k + 1], &n, &l};
      CUDA_KERNEL_NODE_PARAMS p{};
      p.func = f; p.gridDimX = 1; p.gridDimY = 1; p.gridDimZ = 1;
      p.blockDimX = 256; p.blockDimY = 1; p.blockDimZ = 1; p.kernelParams = a;
      cuGraphAddKernelNode((CUgraphNode*)&nodes[k], (CUgraph)g, k ? (CUgraphNode*)&nodes[k - 1] : nullptr, k ? 1 : 0, &p);
    }
  };
  cudaGraph_t g; std::vector<cudaGraphNode_t> nodes;
  {
    std::vector<double> tb, ti, tl;
    for (int it = 0; it < 50; ++it) {
      auto t0 = clk::now();
      build(g, nodes, 0);
      auto t1 = clk::now();
      cudaGraphExec_t e; cudaGraphInstantiate(&e, g, 0);
      auto t2 = clk::now();
      cudaGraphLaunch(e, s); cudaStreamSynchronize(s);
      auto t3 = clk::now();
      tb.push_back(us(t0, t1)); ti.push_back(us(t1, t2)); tl.push_back(us(t2, t3));
      cudaGraphExecDestroy(e); cudaGraphDestroy(g);
    }
    printf("graph x%d: build %.1f us, instantiate %.1f us, launch+sync %.1f us\n", K, med(tb), med(ti), med(tl));
  }
  build(g, nodes, 0);
  cudaGraphExec_t e; cudaGraphInstantiate(&e, g, 0);
  {
    std::vector<double> tl, tq;
    for (int it = 0; it < 200; ++it) {
      auto t0 = clk::now();
      cudaGraphLaunch(e, s);
      auto t1 = clk::now();
      cudaStreamSynchronize(s);
      auto t2 = clk::now();
      tq.push_back(us(t0, t1)); tl.push_back(us(t0, t2));
    }
    printf("graph replay x%d: launch %.1f us, to completion %.1f us\n", K, med(tq), med(tl));
  }
  {
    std::vector<double> tp, tl;
    for (int it = 0; it < 200; ++it) {
      auto t0 = clk::now();
      for (int k = 0; k < K; ++k) {
        void* a[] = {&bufs[(k + it) % (K + 1)], &bufs[k + 1], &n, &l};
        CUDA_KERNEL_NODE_PARAMS p{};
        p.func = f; p.gridDimX = 1; p.gridDimY = 1; p.gridDimZ = 1;
        p.blockDimX = 256; p.blockDimY = 1; p.blockDimZ = 1; p.kernelParams = a;
        cuGraphExecKernelNodeSetParams((CUgraphExec)e, (CUgraphNode)nodes[k], &p);
      }
      auto t1 = clk::now();
      cudaGraphLaunch(e, s); cudaStreamSynchronize(s);
      auto t2 = clk::now();
      tp.push_back(us(t0, t1)); tl.push_back(us(t1, t2));
    }
    printf("graph setparams x%d: %.1f us, launch+sync %.1f us\n", K, med(tp), med(tl));
  }
  {
    std::vector<double> tb, tu, tl;
    for (int it = 0; it < 200; ++it) {
      cudaGraph_t g2; std::vector<cudaGraphNode_t> n2;
      auto t0 = clk::now();
      build(g2, n2, it);
      auto t1 = clk::now();
      cudaGraphExecUpdateResultInfo info;
      cudaGraphExecUpdate(e, g2, &info);
      auto t2 = clk::now();
      cudaGraphLaunch(e, s); cudaStreamSynchronize(s);
      auto t3 = clk::now();
      cudaGraphDestroy(g2);
      tb.push_back(us(t0, t1)); tu.push_back(us(t1, t2)); tl.push_back(us(t2, t3));
    }
    printf("graph rebuild+update x%d: build %.1f, update %.1f, launch+sync %.1f us\n", K, med(tb), med(tu), med(tl));
  }
  {
    std::vector<double> t;
    for (int it = 0; it < 200; ++it) { auto t0 = clk::now(); cudaStreamSynchronize(s); t.push_back(us(t0, clk::now())); }
    printf("idle stream sync %.2f us\n", med(t));
    std::vector<double> t2;
    for (int it = 0; it < 200; ++it) { auto t0 = clk::now(); void* a[] = {&bufs[0], &bufs[1], &n, &l};
      cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, a, nullptr); cudaStreamSynchronize(s); t2.push_back(us(t0, clk::now())); }
    printf("one launch + sync %.2f us\n", med(t2));
  }
  return 0;
}
