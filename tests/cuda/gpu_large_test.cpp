// Arrays past 2^31 elements on the GPU: reductions, arg reductions, scans,
// sorts, copies, random bits and gathers index with 64-bit counts. uint8
// arrays of 2^31 + 2^16 elements (2.1 GB) and broadcasts of 2^32 keep the
// memory small; values are known in closed form or checked on the CPU.
#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuLarge = GpuTest;

constexpr int kRows = (1 << 15) + 1, kCols = 1 << 16; // 2^31 + 2^16
constexpr uint64_t kN = uint64_t{kRows} * kCols;

TEST_F(GpuLarge, ReductionsOfABroadcastOf2To32Elements) {
  DefaultDeviceScope on_gpu(Device::gpu);
  auto x = ones({1 << 16, 1 << 16}, float32);
  EXPECT_EQ(sum(x).item<double>(), 4294967296.0);
  EXPECT_EQ(mean(x).item<float>(), 1.0f);
  EXPECT_EQ(kiln::max(x).item<float>(), 1.0f);
  EXPECT_TRUE(any(x).item<bool>());
  EXPECT_EQ(sum(ones({1 << 16, 1 << 16}, int64)).item<int64_t>(),
            int64_t{1} << 32);
  EXPECT_EQ(argmax(zeros({1 << 16, 1 << 16}, uint8)).item<uint32_t>(), 0u);
}

TEST_F(GpuLarge, MaterializedUint8PastTwoTo31) {
  DefaultDeviceScope on_gpu(Device::gpu);
  auto x = contiguous(ones({kRows, kCols}, uint8));
  x.eval();
  EXPECT_EQ(x.nbytes(), kN);
  EXPECT_EQ(sum(x).item<uint64_t>(), kN);
  // The last element, past 2^31, is written and read where it should be.
  auto y = scatter_add(x, {array(kRows - 1), array(kCols - 1)},
                       reshape(array(uint8_t{4}), {1, 1}), {0, 1});
  y.eval();
  x = array(0.0f);
  EXPECT_EQ(slice(y, {kRows - 1, kCols - 1}, {kRows, kCols}).item<uint8_t>(),
            5);
  EXPECT_EQ(kiln::max(y).item<uint8_t>(), 5);
  EXPECT_EQ(argmax(y).item<uint32_t>(), kN - 1);
  EXPECT_EQ(argmin(y).item<uint32_t>(), 0u);
  // Column sums read every row of each column, across the 2^31 boundary.
  auto cols = sum(astype(y, uint32), 0);
  EXPECT_EQ(slice(cols, {kCols - 1}, {kCols}).item<uint32_t>(),
            uint32_t{kRows} + 4);
  // A scan along rows and a sort of each row, checked at the last row.
  auto scanned = cumsum(y, 1);
  auto last = slice(scanned, {kRows - 1, kCols - 2}, {kRows, kCols});
  EXPECT_EQ(to_doubles(last), (std::vector<double>{kCols - 1.0, kCols + 4.0}));
  scanned = array(0.0f);
  auto sorted = sort(y, 1);
  EXPECT_EQ(slice(sorted, {kRows - 1, 0}, {kRows, 1}).item<uint8_t>(), 1);
  EXPECT_EQ(slice(sorted, {kRows - 1, kCols - 1}, {kRows, kCols})
                .item<uint8_t>(),
            5);
  sorted = array(0.0f);
  // A transposing copy moves the last element to the last place.
  auto t = contiguous(transpose(y));
  EXPECT_EQ(slice(t, {kCols - 1, kRows - 1}, {kCols, kRows}).item<uint8_t>(),
            5);
  EXPECT_EQ(slice(t, {kCols - 2, kRows - 1}, {kCols - 1, kRows})
                .item<uint8_t>(),
            1);
  t = array(0.0f);
  // A gather from the last row.
  auto idx = array({kCols - 1, 0, kCols - 1}, int32);
  auto row = take(slice(y, {kRows - 1, 0}, {kRows, kCols}), idx, 1);
  EXPECT_EQ(to_doubles(row), (std::vector<double>{5, 1, 5}));
}

TEST_F(GpuLarge, RandomBitsPastTwoTo31MatchTheCpu) {
  auto key = random::key(3);
  auto g = random::bits({kRows, kCols}, 1, key, Device::gpu);
  auto c = random::bits({kRows, kCols}, 1, key, Device::cpu);
  auto tail = [](const array& a, Device d) {
    return slice(a, {kRows - 2, kCols - 64}, {kRows, kCols}, d);
  };
  EXPECT_EQ(to_doubles(tail(g, Device::gpu)), to_doubles(tail(c, Device::cpu)));
}

} // namespace
} // namespace kiln::test
