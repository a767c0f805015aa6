// compile and the CPU JIT: fused chains against the same ops unfused, the
// first-call latency of a kernel (cold, and from the disk cache in a new
// process), the host time of a cached call, and tracing + fusing a large
// graph. Kernels go to a temporary cache directory removed at exit.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/backend/cpu/jit_compiler.h"
#include "kiln/kiln.h"

extern char** environ;

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

array bench_input(const Shape& shape, uint32_t seed) {
  size_t n = shape_size(shape);
  std::vector<float> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return array(v.begin(), shape, float32);
}

// A private cache directory for this process's kernels (or the parent's,
// for the child process of BM_JitFirstCallDiskNewProcess).
struct BenchCache {
  std::string dir;
  bool owner = false;
  BenchCache() {
    if (const char* d = std::getenv("KILN_BENCH_CACHE")) {
      dir = d;
    } else {
      char tmpl[] = "/tmp/kiln-bench-XXXXXX";
      if (::mkdtemp(tmpl)) dir = tmpl;
      owner = true;
    }
    ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
    detail::jit_reset();
  }
  ~BenchCache() {
    std::error_code ec;
    if (owner && !dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

BenchCache& bench_cache() {
  static BenchCache c;
  return c;
}

std::vector<array> one(const array& a) { return {a}; }

// (a) The seed: a broadcast of a tiny chain, ten times.
void seed_chain(benchmark::State& state, bool compiled) {
  bench_cache();
  Fn f = [](const std::vector<array>& in) {
    return one(broadcast_to(sin(exp(log(abs(in[0])))), {16384, 2048, 16}));
  };
  Fn fun = compiled ? compile(f) : f;
  for (auto _ : state) {
    auto x = array({1.0f});
    for (int i = 0; i < 10; ++i) x = fun({x})[0];
    x.eval();
  }
}
void BM_SeedBroadcastChain10Compiled(benchmark::State& s) {
  seed_chain(s, true);
}
void BM_SeedBroadcastChain10Uncompiled(benchmark::State& s) {
  seed_chain(s, false);
}

// (b) 8-op chains over 16M float32, each one fused region. The tanh form
// of GELU: 0.5 * x * (1 + tanh(x * (c1 + c2 * x^2))), and a chain with two
// transcendentals (whose cost fusion cannot save): square(exp(tanh(a * b +
// 1) * 0.5 - a) - b).
std::vector<array> gelu8(const std::vector<array>& in) {
  auto& x = in[0];
  auto s = add(multiply(square(x), array(0.0356774081f)), array(0.7978845608f));
  auto v = add(tanh(multiply(s, x)), array(1.0f));
  return one(multiply(multiply(v, x), array(0.5f)));
}

std::vector<array> exp_tanh8(const std::vector<array>& in) {
  auto& a = in[0];
  auto& b = in[1];
  auto t = multiply(tanh(add(multiply(a, b), array(1.0f))), array(0.5f));
  return one(square(subtract(exp(subtract(t, a)), b)));
}

void chain16m(benchmark::State& state, Fn f, bool compiled, int arrays) {
  bench_cache();
  constexpr int n = 1 << 24;
  auto a = bench_input({n}, 1), b = bench_input({n}, 2);
  Fn fun = compiled ? compile(f) : f;
  fun({a, b})[0].eval(); // builds the kernel outside the timing
  for (auto _ : state) fun({a, b})[0].eval();
  // Bytes the fused kernel moves: its inputs and its output.
  state.SetBytesProcessed(state.iterations() * arrays * 4LL * n);
}
void BM_Chain8x16MCompiled(benchmark::State& s) {
  chain16m(s, gelu8, true, 2);
}
void BM_Chain8x16MUncompiled(benchmark::State& s) {
  chain16m(s, gelu8, false, 2);
}
void BM_ExpTanh8x16MCompiled(benchmark::State& s) {
  chain16m(s, exp_tanh8, true, 3);
}
void BM_ExpTanh8x16MUncompiled(benchmark::State& s) {
  chain16m(s, exp_tanh8, false, 3);
}

// (c) First call of a compiled function whose kernel is new: trace, fuse,
// generate, compile, load and run. A constant unique to this process and
// iteration keeps every kernel cold.
void BM_JitFirstCallCold(benchmark::State& state) {
  bench_cache();
  static int counter = 0;
  auto x = bench_input({1024}, 3);
  for (auto _ : state) {
    float c = static_cast<float>(::getpid()) + 0.001f * ++counter;
    auto fun = compile([c](const std::vector<array>& in) {
      return one(add(exp(multiply(in[0], array(c))), in[0]));
    });
    auto t0 = Clock::now();
    fun({x})[0].eval();
    state.SetIterationTime(
        std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

// The same function in the parent and its child processes.
std::vector<array> disk_fn(const std::vector<array>& in) {
  return one(multiply(sin(add(in[0], array(0.25f))), in[0]));
}

// Runs in a child process (registered only there): the first call of
// disk_fn, whose kernel the parent already put in the disk cache. Writes
// the seconds it took to $KILN_BENCH_CHILD.
void BM_JitChildFirstCall(benchmark::State& state) {
  auto x = bench_input({1024}, 4);
  for (auto _ : state) {
    bench_cache();
    auto fun = compile(disk_fn);
    auto t0 = Clock::now();
    fun({x})[0].eval();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    auto st = detail::jit_stats();
    std::ofstream(std::getenv("KILN_BENCH_CHILD"))
        << (st.disk_loads == 1 && st.compiles == 0 ? s : -1.0) << "\n";
  }
}

// (c) First call in a new process with the kernel in the disk cache: the
// time the child measures for its first call (process start excluded).
void BM_JitFirstCallDiskNewProcess(benchmark::State& state) {
  auto& cache = bench_cache();
  compile(disk_fn)({bench_input({1024}, 4)})[0].eval(); // fills the cache
  std::string out = cache.dir + "/child-time.txt";
  std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  std::string child = "KILN_BENCH_CHILD=" + out;
  std::string dir = "KILN_BENCH_CACHE=" + cache.dir;
  for (auto _ : state) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.push_back(*e);
    env.push_back(child);
    env.push_back(dir);
    std::vector<char*> envp, argv;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string filter = "--benchmark_filter=^BM_JitChildFirstCall";
    argv = {exe.data(), filter.data(), nullptr};
    // The child's own report would interleave with this one.
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int status = 0;
    double s = -1;
    int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(),
                           envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc == 0 && ::waitpid(pid, &status, 0) == pid && status == 0) {
      std::ifstream(out) >> s;
    }
    if (s < 0) {
      state.SkipWithError("the child process did not load from the cache");
      break;
    }
    state.SetIterationTime(s);
  }
}

// (d) Host time of a call on 16 elements: compiled with its kernel cached,
// and the same ops unfused.
void host_time(benchmark::State& state, bool compiled) {
  bench_cache();
  auto a = bench_input({16}, 5), b = bench_input({16}, 6);
  Fn fun = compiled ? compile(exp_tanh8) : Fn(exp_tanh8);
  fun({a, b})[0].eval();
  for (auto _ : state) fun({a, b})[0].eval();
}
void BM_CallHostTimeCompiled(benchmark::State& s) { host_time(s, true); }
void BM_CallHostTimeUncompiled(benchmark::State& s) { host_time(s, false); }

// (e) Tracing and fusing a graph of 10,000 elementwise ops (no kernel is
// built: the outputs are not evaluated).
void BM_TraceFuse10kOps(benchmark::State& state) {
  auto x = bench_input({8}, 7), y = bench_input({8}, 8);
  auto f = [](const std::vector<array>& in) {
    array a = in[0], b = in[1];
    for (int i = 0; i < 2500; ++i) {
      a = add(multiply(a, b), array(0.5f));
      b = tanh(subtract(b, a));
    }
    return std::vector<array>{a, b};
  };
  for (auto _ : state) {
    auto fun = compile(f);
    auto outs = fun({x, y});
    benchmark::DoNotOptimize(outs);
  }
}

// (f) Host time of a cached call of a 1,000-node graph of small ops (250
// rounds of matmul, reshape, transpose, reshape on a 4x16 array): the
// replay alone (outputs dropped), and replay plus eval. Per-node host costs
// (allocations, the tape walk) show here, not in (d).
Fn large_graph() {
  return compile([](const std::vector<array>& in) {
    array x = in[0], w = in[1];
    for (int i = 0; i < 250; ++i) {
      array y = reshape(matmul(x, w), {4, 8, 2});
      x = reshape(transpose(y, {0, 2, 1}), {4, 16});
    }
    return std::vector<array>{x};
  });
}
void BM_LargeGraphReplay1kNodes(benchmark::State& state) {
  auto x = bench_input({4, 16}, 9), w = bench_input({16, 16}, 10);
  Fn fun = large_graph();
  fun({x, w})[0].eval();
  for (auto _ : state) benchmark::DoNotOptimize(fun({x, w}));
}
void BM_LargeGraphCallEval1kNodes(benchmark::State& state) {
  auto x = bench_input({4, 16}, 9), w = bench_input({16, 16}, 10);
  Fn fun = large_graph();
  fun({x, w})[0].eval();
  for (auto _ : state) fun({x, w})[0].eval();
}

struct ChildRegistration {
  ChildRegistration() {
    if (std::getenv("KILN_BENCH_CHILD")) {
      benchmark::RegisterBenchmark("BM_JitChildFirstCall", BM_JitChildFirstCall)
          ->Iterations(1);
    }
  }
} child_registration;

} // namespace

BENCHMARK(BM_SeedBroadcastChain10Compiled)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LargeGraphReplay1kNodes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LargeGraphCallEval1kNodes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SeedBroadcastChain10Uncompiled)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Chain8x16MCompiled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Chain8x16MUncompiled)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ExpTanh8x16MCompiled)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ExpTanh8x16MUncompiled)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_JitFirstCallCold)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(10);
BENCHMARK(BM_JitFirstCallDiskNewProcess)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(5);
BENCHMARK(BM_CallHostTimeCompiled)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CallHostTimeUncompiled)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TraceFuse10kOps)->Unit(benchmark::kMillisecond);
