// Small kernels recorded per stream and sent as CUDA graphs
// (backend/cuda/launch_queue.h): results as with launches one by one,
// cached graphs patched with new buffers, and order kept with large
// kernels, other streams and host reads.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include "cuda/gpu_fixture.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/launch_queue.h"

namespace kiln::test {
namespace {

using GpuLaunchQueue = GpuTest;

// A chain of `steps` small elementwise ops (unary, binary with a scalar,
// binary with an array) on device d.
array small_chain(const array& x, const array& w, int steps, Device d) {
  array y = x;
  for (int i = 0; i < steps; ++i) {
    switch (i % 4) {
      case 0: y = sin(y, d); break;
      case 1: y = add(y, w, d); break;
      case 2: y = multiply(y, array(0.75f), d); break;
      default: y = tanh(y, d); break;
    }
  }
  return y;
}

TEST_F(GpuLaunchQueue, SmallChainsMatchTheCpuAndReuseTheirGraph) {
  array x = random_array({7, 5}, float32);
  array w = random_array({7, 5}, float32);
  cuda::LaunchStats before = cuda::launch_stats();
  array g = small_chain(x, w, 150, Device::gpu);
  array c = small_chain(x, w, 150, Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(c), 1e-5, 1e-5));
  cuda::LaunchStats after = cuda::launch_stats();
  if (cuda::graphs_enabled()) {
    EXPECT_GE(after.in_graphs - before.in_graphs, 128);
    EXPECT_GE(after.graphs - before.graphs, 2);
    // On Hopper, the elementwise kernels of new graphs follow each other
    // through programmatic edges.
    if (cuda::device_info().major >= 9 &&
        after.instantiated > before.instantiated) {
      EXPECT_GT(after.programmatic, before.programmatic);
    }
  }
  // The same chain on new inputs, the first ones still alive so every
  // buffer differs: the cached graphs are patched, not rebuilt.
  array x2 = random_array({7, 5}, float32, -1, 1);
  array w2 = random_array({7, 5}, float32, -1, 1);
  array g2 = small_chain(x2, w2, 150, Device::gpu);
  array c2 = small_chain(x2, w2, 150, Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(g2), to_doubles(c2), 1e-5, 1e-5));
  cuda::LaunchStats again = cuda::launch_stats();
  if (cuda::graphs_enabled()) {
    EXPECT_EQ(again.instantiated, after.instantiated);
    EXPECT_GT(again.graphs, after.graphs);
  }
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(c), 1e-5, 1e-5));
}

TEST_F(GpuLaunchQueue, ReductionsBetweenElementwiseKernels) {
  // Small reductions (plain edges) between elementwise kernels
  // (programmatic edges) in one graph: each reads what the one before
  // wrote, in both directions.
  array x = random_array({6, 9}, float32);
  auto run = [&](Device d) {
    array y = x;
    for (int i = 0; i < 24; ++i) {
      array m = sum(y, std::vector<int>{1}, true, d);
      y = tanh(subtract(y, multiply(m, array(0.1f), d), d), d);
      if (i % 3 == 0) y = add(y, max(y, std::vector<int>{0}, true, d), d);
    }
    return y;
  };
  array g = run(Device::gpu);
  array c = run(Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(c), 1e-5, 1e-5));
}

TEST_F(GpuLaunchQueue, LargeKernelsAndHostReadsKeepOrder) {
  // Small ops, then a large kernel reading their result, then small ops
  // reading the large one's: a graph, a direct launch, a graph.
  array x = random_array({3, 4}, float32);
  array w = random_array({3, 4}, float32);
  array big = random_array({3, 1 << 20}, float32, -1, 1);
  auto run = [&](Device d) {
    array s = small_chain(x, w, 40, d);
    array b = add(big, slice(s, Shape{0, 0}, Shape{3, 1}), d);
    array m = max(b, std::vector<int>{1}, true, d);
    return small_chain(m, array(0.5f), 20, d);
  };
  array g = run(Device::gpu);
  array c = run(Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(c), 1e-5, 1e-5));
  // A host read in the middle of recorded work sees all of it.
  array h = small_chain(x, w, 10, Device::gpu);
  eval(h);
  EXPECT_TRUE(all_close(to_doubles(h),
                        to_doubles(small_chain(x, w, 10, Device::cpu)), 1e-5,
                        1e-5));
}

TEST_F(GpuLaunchQueue, StreamsWaitForEachOthersRecordedKernels) {
  Stream s1 = default_stream(Device::gpu);
  Stream s2 = new_stream(Device::gpu);
  array x = random_array({5, 6}, float32);
  array y = x;
  array want = x;
  for (int i = 0; i < 60; ++i) {
    Stream s = (i / 7) % 2 ? s1 : s2; // runs of 7 ops per stream
    y = sin(add(y, array(0.25f), s), s);
    want = sin(add(want, array(0.25f), Device::cpu), Device::cpu);
  }
  EXPECT_TRUE(all_close(to_doubles(y), to_doubles(want), 1e-5, 1e-5));
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
