// GPU buffers: allocator statistics and reuse, a clear error on
// out-of-memory, host reads of GPU arrays, ops that mix devices, and
// ordering across streams and with the host (synchronize, async_eval).
#include <thread>

#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuMemory = GpuTest;

TEST_F(GpuMemory, StatisticsAndCache) {
  gpu::clear_cache();
  size_t before = gpu::get_active_memory();
  {
    array x = random_array({1024, 1024}, float32);
    array y = exp(x, Device::gpu);
    eval(y);
    EXPECT_GE(gpu::get_active_memory(), before + 4u * 1024 * 1024);
    EXPECT_GE(gpu::get_peak_memory(), gpu::get_active_memory());
  }
  // Freed buffers stay cached for reuse, then go back on request.
  EXPECT_EQ(gpu::get_active_memory(), before);
  EXPECT_GE(gpu::get_cache_memory(), 4u * 1024 * 1024);
  size_t cached = gpu::get_cache_memory();
  {
    array z = exp(random_array({1024, 1024}, float32), Device::gpu);
    eval(z);
    EXPECT_LT(gpu::get_cache_memory(), cached); // a cached block reused
  }
  gpu::clear_cache();
  EXPECT_EQ(gpu::get_cache_memory(), 0u);
  gpu::reset_peak_memory();
  EXPECT_EQ(gpu::get_peak_memory(), gpu::get_active_memory());
}

TEST_F(GpuMemory, OutOfMemoryRaisesNamingTheSize) {
  // 4 TiB of float32: more than any GPU holds.
  array big = contiguous(broadcast_to(array(1.0f), {1 << 20, 1 << 20}), false,
                         Device::gpu);
  try {
    eval(big);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of GPU memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(size_t(4) << 40)), std::string::npos)
        << msg;
  }
  // The device is still usable.
  array y = exp(array({1.0f, 2.0f}), Device::gpu);
  EXPECT_NEAR(to_doubles(y)[1], std::exp(2.0), 1e-5);
}

TEST_F(GpuMemory, HostReadsAndMixedDevices) {
  array x = random_array({300, 200}, float32);
  array g = multiply(x, x, Device::gpu); // host buffer uploaded
  eval(g);
  EXPECT_TRUE(g.on_device());
  auto want = map1(to_doubles(x), [](double v) {
    float f = static_cast<float>(v);
    return static_cast<double>(f * f);
  });
  EXPECT_TRUE(all_close(to_doubles(g), want, 0, 0)); // host view
  // A CPU op reading a GPU array, and a GPU op reading a CPU result.
  array c = add(g, x, Device::cpu);
  array back = subtract(c, g, Device::gpu);
  EXPECT_TRUE(all_close(to_doubles(back), to_doubles(x), 1e-5, 1e-5));
  double total = 0;
  for (double v : want) total += v;
  EXPECT_NEAR(sum(g).item<float>(), total, 1e-3 * total);
}

TEST_F(GpuMemory, CrossStreamAndHostOrdering) {
  Stream s1 = default_stream(Device::gpu);
  Stream s2 = new_stream(Device::gpu);
  array x = random_array({2048, 2048}, float32, -1, 1);
  // A chain that alternates streams: each step must see the previous one.
  array y = x;
  for (int i = 0; i < 8; ++i) {
    y = add(multiply(y, array(0.5f), i % 2 ? s1 : s2), array(1.0f),
            i % 2 ? s2 : s1);
  }
  array want = x;
  for (int i = 0; i < 8; ++i) {
    want = add(multiply(want, array(0.5f), Device::cpu), array(1.0f),
               Device::cpu);
  }
  EXPECT_TRUE(all_close(to_doubles(y), to_doubles(want), 1e-6, 1e-6));
  // async_eval then wait, and synchronize per stream.
  array z = exp(y, s2);
  async_eval({z});
  z.wait();
  synchronize(s2);
  EXPECT_TRUE(all_close(to_doubles(z), map1(to_doubles(want), [](double v) {
                          return std::exp(v);
                        }),
                        1e-5, 1e-5));
}

TEST_F(GpuMemory, FallbackPrimitivesRunOnGpuStreams) {
  // Reductions and softmax have no GPU kernels yet: they still run on a GPU
  // stream, through the CPU, and feed GPU kernels.
  array x = random_array({64, 48}, float32);
  array g = exp(softmax(x, std::vector<int>{-1}, false, Device::gpu),
                Device::gpu);
  array c = exp(softmax(x, std::vector<int>{-1}, false, Device::cpu),
                Device::cpu);
  EXPECT_TRUE(all_close(to_doubles(g), to_doubles(c), 1e-6, 1e-6));
  array m = max(x, false, Device::gpu);
  EXPECT_EQ(m.item<float>(), max(x, false, Device::cpu).item<float>());
}

} // namespace
} // namespace kiln::test
