// The CPU JIT's kernels: every fusable primitive in a generated kernel, for
// each dtype family, against the same ops unfused; the layouts a fused
// region may see (contiguous, transposed, mixed, broadcast, sliced, scalars,
// 0-d, empty); constants baked exactly; NaN/Inf propagation; donation.
#include <dlfcn.h>

#include <climits>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "backend/jit_fixture.h"
#include "kiln/core/preprocessor.h"
#include "kiln/primitives/binary_table.h"

namespace kiln::test {
namespace {

using CpuJit = JitTest;

// Primitive names inside the fused regions of f's compiled graph.
std::set<std::string> fused_primitives(const Fn& f,
                                       const std::vector<array>& in) {
  std::string text = export_compiled_graph(compile(f), in);
  std::set<std::string> names;
  for (size_t p = text.find("Compiled{"); p != std::string::npos;
       p = text.find("Compiled{", p + 1)) {
    size_t end = text.find('}', p);
    std::istringstream ss(text.substr(p + 9, end - p - 9));
    for (std::string n; ss >> n;) names.insert(n);
  }
  return names;
}

void expect_fused(const Fn& f, const std::vector<array>& in,
                  const std::set<std::string>& expected) {
  auto names = fused_primitives(f, in);
  for (auto& n : expected) EXPECT_TRUE(names.count(n)) << n << " not fused";
}

// Every floating-point row of the op tables, each an output of one region:
// inexact unary ops on u in (0.1, 0.9), inside every domain but arccosh's
// (NaN on both sides), the others on p in (-2, 2), binary ops on (p, q).
#define KILN_FLOAT_UNARY_integral(op)
#define KILN_FLOAT_UNARY_inexact(op) out.push_back(kiln::op(u));
#define KILN_FLOAT_UNARY_all(op) out.push_back(kiln::op(p));
#define KILN_FLOAT_UNARY_magnitude KILN_FLOAT_UNARY_all
#define KILN_FLOAT_UNARY_predicate KILN_FLOAT_UNARY_all
#define KILN_FLOAT_UNARY(Name, op, kind, ...) KILN_FLOAT_UNARY_##kind(op)
#define KILN_FLOAT_BINARY_integral(op)
#define KILN_FLOAT_BINARY_all(op) \
  KILN_UNLESS_NONE(op, out.push_back(kiln::op(p, q));)
#define KILN_FLOAT_BINARY_numeric KILN_FLOAT_BINARY_all
#define KILN_FLOAT_BINARY_inexact KILN_FLOAT_BINARY_all
#define KILN_FLOAT_BINARY_predicate KILN_FLOAT_BINARY_all
#define KILN_FLOAT_BINARY(Name, op, kind, ...) KILN_FLOAT_BINARY_##kind(op)

std::vector<array> float_ops(const std::vector<array>& in) {
  Dtype dt = in[0].dtype();
  auto c = [&](double v) { return array(v, dt); };
  auto p = multiply(in[0], c(1.0));
  auto q = add(p, in[1]);
  auto u = add(multiply(sigmoid(p), c(0.8)), c(0.1));
  std::vector<array> out;
  KILN_UNARY_OPS(KILN_FLOAT_UNARY)
  KILN_BINARY_OPS(KILN_FLOAT_BINARY)
  out.push_back(where(greater(p, q), p, q));
  out.push_back(astype(p, dt == float32 ? float16 : float32));
  return out;
}

// The op tables' primitives in the graph f builds: compile must fuse each.
std::set<std::string> table_primitives(const Fn& f,
                                       const std::vector<array>& in) {
  std::set<std::string> rows = {"Select", "AsType"};
#define KILN_ROW_NAME(Name, ...) rows.insert(#Name);
  KILN_UNARY_OPS(KILN_ROW_NAME)
  KILN_BINARY_OPS(KILN_ROW_NAME)
#undef KILN_ROW_NAME
  std::set<std::string> names;
  std::vector<array> todo = f(in);
  std::set<uintptr_t> seen;
  while (!todo.empty()) {
    array a = todo.back();
    todo.pop_back();
    if (!a.has_primitive() || !seen.insert(a.id()).second) continue;
    if (rows.count(a.primitive().name())) names.insert(a.primitive().name());
    for (auto& x : a.inputs()) todo.push_back(x);
  }
  return names;
}

TEST_F(CpuJit, EveryFloatPrimitiveMatchesUnfused) {
  auto before = detail::jit_stats();
  for (Dtype dt : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<array> in = {random_array({3, 7}, dt, -2, 2),
                             random_array({3, 7}, dt, 0.5, 2)};
    if (dt == float32) {
      auto names = table_primitives(float_ops, in);
      EXPECT_GE(names.size(), 50u); // the rows reached the graph
      expect_fused(float_ops, in, names);
    }
    expect_matches_unfused(float_ops, in);
  }
  auto after = detail::jit_stats();
  EXPECT_GE(after.compiles - before.compiles, float_dtypes().size());
  EXPECT_EQ(after.failures, before.failures);
}

// Every integer primitive (bitwise ops, shifts, integer division).
std::vector<array> int_ops(const std::vector<array>& in) {
  Dtype dt = in[0].dtype();
  auto p = multiply(in[0], array(1, dt));
  auto q = add(p, in[1]);
  auto e = remainder(abs(q), array(5, dt)); // small exponents
  return {abs(p),
          negative(p),
          sign(p),
          square(p),
          logical_not(p),
          bitwise_invert(p),
          stop_gradient(p),
          q,
          subtract(p, q),
          multiply(p, q),
          divide(p, q),
          floor_divide(p, q),
          remainder(p, q),
          power(p, e),
          maximum(p, q),
          minimum(p, q),
          equal(p, q),
          not_equal(p, q),
          less(p, q),
          less_equal(p, q),
          greater(p, q),
          greater_equal(p, q),
          logical_and(p, q),
          logical_or(p, q),
          bitwise_and(p, q),
          bitwise_or(p, q),
          bitwise_xor(p, q),
          left_shift(p, q),
          right_shift(p, q),
          where(less(p, q), p, q),
          astype(p, float32),
          astype(p, int8),
          astype(p, bool_)};
}

TEST_F(CpuJit, EveryIntegerPrimitiveMatchesUnfusedExactly) {
  auto before = detail::jit_stats();
  for (Dtype dt : int_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    double lo = is_unsigned(dt) ? 0 : -20;
    std::vector<array> in = {random_array({4, 5}, dt, lo, 20),
                             random_array({4, 5}, dt, lo, 20)};
    if (dt == int32) {
      expect_fused(int_ops, in,
                   {"BitwiseInvert", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
                    "LeftShift", "RightShift", "FloorDivide", "Remainder",
                    "Power", "Select", "AsType", "LogicalNot"});
    }
    expect_matches_unfused(int_ops, in);
  }
  EXPECT_EQ(detail::jit_stats().failures, before.failures);
}

TEST_F(CpuJit, BoolPrimitivesMatchUnfusedExactly) {
  auto f = [](const std::vector<array>& in) {
    auto p = logical_and(in[0], array(true));
    auto q = logical_or(p, in[1]);
    return std::vector<array>{logical_not(p),     bitwise_invert(p),
                              equal(p, q),        not_equal(p, q),
                              bitwise_and(p, q),  bitwise_or(p, q),
                              bitwise_xor(p, q),  maximum(p, q),
                              minimum(p, q),      where(p, q, in[1]),
                              astype(q, float32), astype(p, int8),
                              greater(p, q),      abs(p),
                              square(q)};
  };
  std::vector<array> in = {random_array({5, 3}, bool_),
                           random_array({5, 3}, bool_)};
  expect_matches_unfused(f, in);
}

// NaN and Inf flow through the kernel as through the unfused ops (no
// fast-math: maximum, sign, logaddexp and isnan keep their NaN rules).
TEST_F(CpuJit, NanAndInfPropagateAsUnfused) {
  float inf = std::numeric_limits<float>::infinity();
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {nan, inf, -inf, 0.0f, -0.0f, 1.5f, -2.0f, nan};
  std::vector<float> ys = {1.0f, nan, -inf, -inf, inf, nan, 3.0f, nan};
  auto f = [](const std::vector<array>& in) {
    auto p = multiply(in[0], array(1.0f));
    auto q = multiply(in[1], array(1.0f));
    return std::vector<array>{
        maximum(p, q), minimum(p, q),   maximum(q, p),
        sign(p),       logaddexp(p, q), isnan(p),
        isinf(q),      exp(p),          log(p),
        tanh(q),       sqrt(q),         erfinv(p),
        floor(p),      equal(p, q),     array_equal(exp(p), exp(q), true),
        divide(p, q),  sigmoid(q)};
  };
  for (Dtype dt : {float32, float64, float16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<array> in = {astype(array(xs.begin(), {8}, float32), dt),
                             astype(array(ys.begin(), {8}, float32), dt)};
    auto want = f(in);
    auto got = compile(f)(in);
    for (size_t k = 0; k < got.size(); ++k) {
      auto g = to_doubles(got[k]), w = to_doubles(want[k]);
      for (size_t i = 0; i < g.size(); ++i) {
        bool same = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                    std::abs(g[i] - w[i]) <= 4 * tolerance(dt) * std::abs(w[i]);
        EXPECT_TRUE(same) << "output " << k << " element " << i << ": got "
                          << g[i] << ", want " << w[i];
      }
    }
  }
}

std::vector<array> chain(const std::vector<array>& in) {
  return {add(exp(in[0]), multiply(tanh(in[1]), array(2.0f))),
          greater(in[0], in[1])};
}

TEST_F(CpuJit, TransposedInputsKeepTheirLayout) {
  auto a = as_transposed(random_array({6, 9}, float32));
  auto b = as_transposed(random_array({6, 9}, float32));
  auto out = compile(chain)({a, b});
  eval(out);
  for (auto& o : out) {
    EXPECT_EQ(o.strides(), a.strides());
    EXPECT_EQ(o.data_size(), 54u);
    EXPECT_TRUE(o.flags().col_contiguous);
  }
  expect_matches_unfused(chain, {a, b});
}

TEST_F(CpuJit, MixedLayoutsGiveRowMajorOutputs) {
  auto a = as_transposed(random_array({5, 4, 3}, float32));
  auto b = random_array({5, 4, 3}, float32);
  auto c = transpose(random_array({3, 5, 4}, float32), {1, 2, 0});
  for (auto& pair : std::vector<std::vector<array>>{{a, b}, {b, c}, {c, a}}) {
    auto out = compile(chain)(pair);
    eval(out);
    EXPECT_TRUE(out[0].flags().row_contiguous);
    EXPECT_TRUE(out[1].flags().row_contiguous);
    expect_matches_unfused(chain, pair);
  }
}

TEST_F(CpuJit, BroadcastAndSlicedInputs) {
  auto row = random_array({1, 6}, float32);
  auto col = random_array({5, 1}, float32);
  auto full = random_array({5, 6}, float32);
  auto big = random_array({11, 20}, float32);
  // An offset with steps, and negative steps (reversed rows and columns).
  auto sliced = slice(big, Shape{1, 2}, Shape{11, 20}, Shape{2, 3});
  auto rev = slice(big, Shape{9, 17}, Shape{INT_MIN, INT_MIN}, Shape{-2, -3});
  ASSERT_EQ(sliced.shape(), (Shape{5, 6}));
  ASSERT_EQ(rev.shape(), (Shape{5, 6}));
  auto rb = broadcast_to(row, {5, 6}), cb = broadcast_to(col, {5, 6});
  std::vector<std::vector<array>> cases = {{rb, cb},       {rb, full},
                                           {sliced, full}, {sliced, cb},
                                           {rev, sliced},  {rev, full}};
  for (auto& in : cases) expect_matches_unfused(chain, in);
  // Two broadcasts of one row share a layout: the flat kernel runs over the
  // row's 6 elements and the outputs keep the stride-0 layout.
  auto out = compile(chain)({broadcast_to(row, {5, 6}),
                             broadcast_to(random_array({6}, float32), {5, 6})});
  eval(out);
  EXPECT_EQ(out[0].strides(), (Strides{0, 1}));
  EXPECT_EQ(out[0].data_size(), 6u);
}

TEST_F(CpuJit, ScalarsZeroDimAndEmpty) {
  // A 0-d input broadcast inside the function: read as a scalar.
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{sin(add(multiply(in[0], in[1]), array(0.5f)))};
  };
  auto x = random_array({4, 3}, float32);
  expect_matches_unfused(f, {x, random_array({}, float32)});
  // All inputs 0-d: a one-element kernel.
  expect_matches_unfused(
      f, {random_array({}, float32), random_array({}, float32)});
  // Empty: no kernel is built.
  auto before = detail::jit_stats();
  auto e = compile(f)(
      {random_array({0, 3}, float32), random_array({0, 3}, float32)});
  e[0].eval();
  EXPECT_EQ(e[0].shape(), (Shape{0, 3}));
  EXPECT_EQ(detail::jit_stats().compiles, before.compiles);
}

TEST_F(CpuJit, ConstantsAreBakedExactly) {
  // Values that decimal printing would round, NaN/Inf, 16-bit and 64-bit
  // integer constants.
  auto f32 = [](const std::vector<array>& in) {
    auto p = multiply(in[0], array(0.1f));
    return std::vector<array>{
        add(p, array(1.0f / 3.0f)), maximum(p, array(NAN)),
        minimum(p, array(-INFINITY)), multiply(p, array(1e-40f))};
  };
  expect_matches_unfused(f32, {random_array({7}, float32)}, 0);
  auto f16 = [](const std::vector<array>& in) {
    auto p = multiply(in[0], array(0.1, float16));
    return std::vector<array>{add(p, array(1.0 / 3.0, float16))};
  };
  expect_matches_unfused(f16, {random_array({7}, float16)}, 0);
  auto f64 = [](const std::vector<array>& in) {
    return std::vector<array>{
        add(multiply(in[0], array(0.1, float64)), array(1.0 / 3.0, float64))};
  };
  expect_matches_unfused(f64, {random_array({7}, float64)}, 0);
  auto i64 = [](const std::vector<array>& in) {
    auto big = array(int64_t{(1LL << 40) + 3});
    return std::vector<array>{
        bitwise_xor(add(in[0], big), array(int64_t{-7})),
        multiply(astype(in[0], uint64), array(~uint64_t{0}))};
  };
  expect_matches_unfused(i64, {random_array({7}, int64, -50, 50)}, 0);
  // A new constant is a new kernel, never the old one.
  auto k = [](float c) {
    return [c](const std::vector<array>& in) {
      return std::vector<array>{exp(multiply(in[0], array(c)))};
    };
  };
  auto x = random_array({5}, float32);
  auto a = to_doubles(compile(k(2.0f))({x})[0]);
  auto b = to_doubles(compile(k(3.0f))({x})[0]);
  EXPECT_TRUE(all_close(a, to_doubles(exp(multiply(x, array(2.0f)))), 1e-6, 0));
  EXPECT_TRUE(all_close(b, to_doubles(exp(multiply(x, array(3.0f)))), 1e-6, 0));
}

TEST_F(CpuJit, DonatedInputBufferIsReused) {
  auto fun = compile([](const std::vector<array>& in) {
    return std::vector<array>{add(exp(in[0]), array(1.0f))};
  });
  auto x = random_array({64}, float32);
  // The first call's inputs stay referenced by the trace: trace on another.
  fun({random_array({64}, float32)})[0].eval();
  auto want = to_doubles(add(exp(exp(x)), array(1.0f)));
  auto t = exp(x, Device::cpu); // a host buffer (a GPU one is never donated)
  t.eval();
  void* ptr = t.buffer().ptr;
  auto out = fun({t})[0];
  t = array(0.0f); // the graph holds the only reference now
  out.eval();
  EXPECT_EQ(out.buffer().ptr, ptr);
  EXPECT_TRUE(all_close(to_doubles(out), want, 1e-6, 1e-6));
}

TEST_F(CpuJit, LargeArraysSplitAcrossThreads) {
  // Above the parallel grain, in both kernels; many rows and odd sizes.
  auto a = random_array({301, 997}, float32);
  auto b = as_transposed(random_array({301, 997}, float32));
  expect_matches_unfused(chain, {a, random_array({301, 997}, float32)});
  expect_matches_unfused(chain, {a, b});
  auto c = transpose(random_array({7, 301, 143}, float32), {1, 2, 0});
  expect_matches_unfused(chain, {c, random_array({301, 143, 7}, float32)});
}

TEST_F(CpuJit, KernelsAreNeverReusedAcrossDtypes) {
  // One function, three dtypes: three kernels with distinct names.
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{maximum(add(in[0], in[1]), square(in[1]))};
  };
  clear_compile_log();
  auto before = detail::jit_stats();
  for (Dtype dt : {float32, float16, int32}) {
    expect_matches_unfused(f, {random_array({6}, dt), random_array({6}, dt)});
  }
  EXPECT_EQ(detail::jit_stats().compiles - before.compiles, 3u);
  std::set<std::string> names;
  for (auto& line : compile_log()) {
    if (line.rfind("jit kernel ", 0) == 0)
      names.insert(line.substr(11, line.find(' ', 11) - 11));
  }
  EXPECT_EQ(names.size(), 3u);
}

TEST_F(CpuJit, DebugLogNamesKernelAndReadableSource) {
  clear_compile_log();
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{cos(multiply(in[0], array(4.5f)))};
  };
  compile(f)({random_array({3}, float32)})[0].eval();
  std::string line;
  for (auto& l : compile_log()) {
    if (l.rfind("jit kernel ", 0) == 0) line = l;
  }
  ASSERT_FALSE(line.empty());
  std::string symbol = line.substr(11, line.find(' ', 11) - 11);
  std::string path = line.substr(line.rfind(' ') + 1);
  EXPECT_EQ(path.rfind(cache_dir(), 0), 0u) << path;
  std::ifstream src(path);
  std::stringstream text;
  text << src.rdbuf();
  EXPECT_NE(text.str().find("extern \"C\" void " + symbol), std::string::npos);
  EXPECT_NE(text.str().find("Cos{}("), std::string::npos);
  EXPECT_NE(text.str().find("/* 4.5 */"), std::string::npos);
}

TEST_F(CpuJit, SquareByAConstantTwoAsUnfused) {
  // x ** 2 runs as x * x unfused (a multiply, not a pow call); fused, a
  // power by a constant 2 does the same, bit for bit, so compiling a
  // squared error never makes it slower. Another exponent stays a pow.
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    auto sq = [dt](const std::vector<array>& in) {
      return std::vector<array>{
          power(subtract(in[0], in[1]), array(2.0, dt))};
    };
    auto cube = [dt](const std::vector<array>& in) {
      return std::vector<array>{
          power(subtract(in[0], in[1]), array(3.0, dt))};
    };
    std::vector<array> in = {random_array({33, 7}, dt),
                             random_array({33, 7}, dt)};
    expect_matches_unfused(sq, in, 0);
    expect_matches_unfused(cube, in);
  }
  // The kernels' sources take the short forms, and build (a kernel that
  // fails to build leaves its ops unfused, which the checks above allow).
  for (float y : {2.0f, 3.0f, -2.0f}) {
    clear_compile_log();
    auto f = [y](const std::vector<array>& in) {
      return std::vector<array>{power(multiply(in[0], array(1.5f)), array(y))};
    };
    compile(f)({random_array({3}, float32)})[0].eval();
    std::string path;
    for (auto& l : compile_log()) {
      if (l.rfind("jit kernel ", 0) == 0) path = l.substr(l.rfind(' ') + 1);
    }
    ASSERT_FALSE(path.empty()) << y;
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    std::string want = y == 2 ? "Square{}(" : "std::pow(std::abs(";
    EXPECT_NE(text.str().find(want), std::string::npos) << text.str();
    EXPECT_EQ(text.str().find("Power{}("), std::string::npos) << text.str();
    EXPECT_EQ(text.str().find("std::copysign(") != std::string::npos, y == 3)
        << text.str();
    std::filesystem::path so(path);
    EXPECT_TRUE(std::filesystem::exists(so.replace_extension(".so")))
        << "the kernel of x ** " << y << " did not build";
  }
}

TEST_F(CpuJit, TranscendentalsUseVectorMath) {
  // GCC maps the kernel's exp and tanh onto libmvec's SIMD forms: the
  // library references one of their vector symbols.
  void* mvec = ::dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!mvec || !::dlsym(mvec, "_ZGVbN4v_expf")) GTEST_SKIP() << "no libmvec";
  const char* cxx = std::getenv("CXX");
  if (cxx && std::string(cxx).find("clang") != std::string::npos) {
    GTEST_SKIP() << "clang has no SIMD declarations";
  }
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{tanh(exp(multiply(in[0], array(0.625f))))};
  };
  expect_matches_unfused(f, {random_array({100}, float32)});
  std::string so;
  for (auto& e : std::filesystem::directory_iterator(cache_dir())) {
    if (e.path().extension() != ".so") continue;
    std::ifstream lib(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << lib.rdbuf();
    if (bytes.str().find("kiln_Multiply_Exp_Tanh") != std::string::npos) {
      so = bytes.str();
    }
  }
  ASSERT_FALSE(so.empty());
  EXPECT_NE(so.find("v_expf"), std::string::npos);
  EXPECT_NE(so.find("v_tanhf"), std::string::npos);
}

} // namespace
} // namespace kiln::test
