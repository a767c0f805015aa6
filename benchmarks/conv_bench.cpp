// Convolution on the CPU at the digits LeNet's shapes (batch 64, 3x3
// kernels, padding 1: 8x8 images 1 -> 16 channels, then 4x4 images 16 -> 32
// channels): the forward, the input's gradient and the weight's gradient,
// each built on evaluated inputs and evaluated. The gradients are the
// convolutions the vjp builds.
#include <benchmark/benchmark.h>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

array lcg_input(const Shape& shape, uint32_t seed) {
  std::vector<float> v(shape_size(shape));
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return array(v.begin(), shape, float32);
}

enum Part { forward = 0, input_grad = 1, weight_grad = 2 };

// Arguments: image side, input channels, output channels, part.
void BM_ConvLeNet(benchmark::State& state) {
  int h = static_cast<int>(state.range(0)), c = static_cast<int>(state.range(1));
  int o = static_cast<int>(state.range(2));
  auto part = static_cast<Part>(state.range(3));
  array x = lcg_input({64, h, h, c}, 1), w = lcg_input({o, 3, 3, c}, 2);
  array g = lcg_input({64, h, h, o}, 3);
  auto conv = [](const array& a, const array& b) {
    return conv2d(a, b, {1, 1}, {1, 1});
  };
  for (auto _ : state) {
    array r = part == forward ? conv(x, w)
              : part == input_grad
                  ? vjp([&](const array& a) { return conv(a, w); }, x, g).second
                  : vjp([&](const array& b) { return conv(x, b); }, w, g).second;
    r.eval();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * 64 * h * h * o * 9 * c * state.iterations(),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

} // namespace

BENCHMARK(BM_ConvLeNet)
    ->ArgNames({"side", "c_in", "c_out", "part"})
    ->ArgsProduct({{8}, {1}, {16}, {0, 1, 2}})
    ->ArgsProduct({{4}, {16}, {32}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
