// CPU op benchmarks: the reference set. Each iteration builds the op
// on evaluated inputs and evaluates it; peers (NumPy) are timed by
// scripts/bench-cpu in the same run.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

array random_input(const Shape& shape) {
  // Deterministic, non-trivial values without depending on kiln's random.
  size_t n = shape_size(shape);
  std::vector<float> v(n);
  uint32_t s = 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return array(v.begin(), shape, float32);
}

constexpr int n16m = 1 << 24;

void BM_Add16M(benchmark::State& state) {
  auto a = random_input({n16m}), b = random_input({n16m});
  for (auto _ : state) {
    auto c = add(a, b);
    c.eval();
  }
  state.SetBytesProcessed(state.iterations() * 3LL * n16m * 4);
}

void BM_Sum16M(benchmark::State& state) {
  auto a = random_input({n16m});
  for (auto _ : state) {
    auto c = sum(a);
    c.eval();
  }
  state.SetBytesProcessed(state.iterations() * 1LL * n16m * 4);
}

void BM_Exp16M(benchmark::State& state) {
  auto a = random_input({n16m});
  for (auto _ : state) {
    auto c = exp(a);
    c.eval();
  }
  state.SetBytesProcessed(state.iterations() * 2LL * n16m * 4);
}

void BM_TransposeCopy4096(benchmark::State& state) {
  auto a = random_input({4096, 4096});
  for (auto _ : state) {
    auto c = contiguous(transpose(a));
    c.eval();
  }
  state.SetBytesProcessed(state.iterations() * 2LL * 4096 * 4096 * 4);
}

// A matrix minus a transposed one (a weight and its gradient in an
// uncompiled optimizer step): mixed layouts, a row-major output.
void BM_SubtractTransposed1024(benchmark::State& state) {
  auto a = random_input({1024, 1024}), b = random_input({1024, 1024});
  auto bt = transpose(b);
  for (auto _ : state) {
    auto c = subtract(a, bt);
    c.eval();
  }
  state.SetBytesProcessed(state.iterations() * 3LL * 1024 * 1024 * 4);
}

// Reductions and scans of a 2048x2048 float32 matrix: extremes along its
// rows (argmax over logits, say), a running sum down its columns.
template <typename Reduce>
void rows_2048(benchmark::State& state, Reduce reduce) {
  auto a = random_input({2048, 2048});
  for (auto _ : state) {
    auto c = reduce(a);
    c.eval();
  }
  state.SetBytesProcessed(state.iterations() * 2048LL * 2048 * 4);
}

void BM_CumsumColumns2048(benchmark::State& state) {
  rows_2048(state, [](const array& a) { return cumsum(a, 0); });
}

void BM_ArgMaxRows2048(benchmark::State& state) {
  rows_2048(state, [](const array& a) { return argmax(a, 1); });
}

void BM_MaxRows2048(benchmark::State& state) {
  rows_2048(state, [](const array& a) { return max(a, 1); });
}

// Ops over 4M float32 values: fn of one input (flat_4m) or two
// (flat_4m_pair), evaluated each iteration.
template <typename Fn>
void flat_4m(benchmark::State& state, Fn fn) {
  auto a = random_input({1 << 22});
  for (auto _ : state) fn(a).eval();
}

template <typename Fn>
void flat_4m_pair(benchmark::State& state, Fn fn) {
  auto a = random_input({1 << 22}), b = random_input({1 << 22});
  for (auto _ : state) fn(a, b).eval();
}

// x ** 1.5 of positive values, x ** 2, atan2 of two arrays.
void BM_Power4M(benchmark::State& state) {
  auto e = array(1.5f);
  auto positive = abs(random_input({1 << 22}));
  eval(positive);
  for (auto _ : state) power(positive, e).eval();
}

void BM_PowerSquare4M(benchmark::State& state) {
  flat_4m(state, [](const array& a) { return power(a, array(2.0f)); });
}

void BM_ArcTan2_4M(benchmark::State& state) {
  flat_4m_pair(state, [](const array& a, const array& b) {
    return arctan2(a, b);
  });
}

void BM_SoftmaxRows2048(benchmark::State& state) {
  rows_2048(state, [](const array& a) { return softmax(a, -1); });
}

void BM_LogSumExpRows2048(benchmark::State& state) {
  rows_2048(state, [](const array& a) { return logsumexp(a, 1); });
}

// sigmoid (SiLU and gates call it), logaddexp (softplus is
// logaddexp(x, 0)).
void BM_Sigmoid4M(benchmark::State& state) {
  flat_4m(state, [](const array& a) { return sigmoid(a); });
}

void BM_LogAddExp4M(benchmark::State& state) {
  flat_4m_pair(state, [](const array& a, const array& b) {
    return logaddexp(a, b);
  });
}

void BM_SortRows2048(benchmark::State& state) {
  rows_2048(state, [](const array& a) { return sort(a, 1); });
}

// A flat sort of 4M float32 values and their stable argsort.
void BM_Sort4M(benchmark::State& state) {
  flat_4m(state, [](const array& a) { return sort(a); });
}

void BM_ArgSort4M(benchmark::State& state) {
  flat_4m(state, [](const array& a) { return argsort(a); });
}

void BM_Matmul1024(benchmark::State& state) {
  const int n = 1024;
  auto a = random_input({n, n}), b = random_input({n, n});
  for (auto _ : state) {
    auto c = matmul(a, b);
    c.eval();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * n * n * n * state.iterations(), benchmark::Counter::kIsRate,
      benchmark::Counter::kIs1000);
}

void BM_OpenBLASSgemm1024(benchmark::State& state) {
  const int n = 1024;
  auto a = random_input({n, n}), b = random_input({n, n});
  std::vector<float> c(n * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data<float>(), n, b.data<float>(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * n * n * n * state.iterations(), benchmark::Counter::kIsRate,
      benchmark::Counter::kIs1000);
}

} // namespace

BENCHMARK(BM_Add16M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum16M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Exp16M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TransposeCopy4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SubtractTransposed1024)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CumsumColumns2048)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_ArgMaxRows2048)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MaxRows2048)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Power4M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PowerSquare4M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ArcTan2_4M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SoftmaxRows2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LogSumExpRows2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sigmoid4M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LogAddExp4M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SortRows2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sort4M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ArgSort4M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenBLASSgemm1024)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
