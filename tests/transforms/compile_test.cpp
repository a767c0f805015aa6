// compile: trace cache, simplify, fuse, captured state, composition with the
// other transformations, and the seed's layout rules.
#include <random>
#include <set>
#include <sstream>

#include "kiln/primitives/compiled.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

std::vector<array> one(const array& a) { return {a}; }

TEST(Compile, MatchesEagerAndCachesTraces) {
  int traces = 0;
  auto f = [&](const std::vector<array>& in) {
    ++traces;
    auto y = add(multiply(exp(in[0]), in[1]), array(1.0f));
    return std::vector<array>{tanh(y), sum(y, 0)};
  };
  auto cf = compile(f);
  auto x = random_array({4, 5}, float32), y = random_array({4, 5}, float32);
  auto want = f({x, y});
  traces = 0;
  for (int i = 0; i < 3; ++i) {
    auto got = cf({x, y});
    EXPECT_TRUE(all_close(to_doubles(got[0]), to_doubles(want[0]), 1e-6, 1e-6));
    EXPECT_TRUE(all_close(to_doubles(got[1]), to_doubles(want[1]), 1e-5, 1e-5));
  }
  EXPECT_EQ(traces, 1); // one trace per signature
  cf({random_array({2, 5}, float32), random_array({2, 5}, float32)});
  EXPECT_EQ(traces, 2); // a new shape traces again
  cf({astype(x, float16), astype(y, float16)});
  EXPECT_EQ(traces, 3); // so does a new dtype
}

TEST(Compile, ShapelessOperandsThatNoLongerBroadcastRaise) {
  // x + w with a captured w of the traced shape: at a new shape of x the
  // operands no longer line up, which is an error (never a kernel reading
  // past w).
  auto w = random_array({2, 3}, float32);
  auto cf = compile([w](const std::vector<array>& in) { return one(add(in[0], w)); }, true);
  cf({random_array({2, 3}, float32)});
  EXPECT_THROW(cf({random_array({4, 5}, float32)}), std::invalid_argument);
}

TEST(Compile, ShapelessRebroadcastsImplicitBroadcastsOnly) {
  // x - max(x, keepdims): the max is broadcast against x at the new shape.
  auto centre = [](const std::vector<array>& in) {
    return one(subtract(in[0], max(in[0], std::vector<int>{-1}, true)));
  };
  auto cc = compile(centre, true);
  cc({random_array({2, 3}, float32)});
  auto x = random_array({4, 5}, float32);
  auto got = cc({x})[0];
  ASSERT_EQ(got.shape(), (Shape{4, 5}));
  EXPECT_TRUE(all_close(to_doubles(got), to_doubles(centre({x})[0]), 0, 0));
  // An explicit broadcast_to keeps its shape: (1, 4) -> (3, 4), plus y.
  auto expl = [](const std::vector<array>& in) {
    return one(add(broadcast_to(in[0], {3, 4}), in[1]));
  };
  auto ce = compile(expl, true);
  ce({random_array({1, 4}, float32), random_array({4}, float32)});
  auto a = random_array({1, 4}, float32), b = random_array({1, 4}, float32);
  auto out = ce({a, b})[0];
  ASSERT_EQ(out.shape(), (Shape{3, 4}));
  EXPECT_TRUE(all_close(to_doubles(out), to_doubles(expl({a, b})[0]), 0, 0));
  EXPECT_THROW(ce({random_array({1, 5}, float32), random_array({5}, float32)}),
               std::invalid_argument);
}

TEST(Compile, ShapelessMeanAndVarCountTheNewShape) {
  // mean and var divide by a count of the input's elements, which a
  // shapeless trace must take from the new shape, not the traced one.
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{mean(in[0], std::vector<int>{-1}, true),
                              var(in[0], std::vector<int>{-1}, true, 1)};
  };
  auto cf = compile(f, true);
  cf({random_array({2, 3}, float32)});
  auto x = random_array({4, 7}, float32);
  auto got = cf({x});
  auto want = f({x});
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(got[k].shape(), (Shape{4, 1}));
    EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-6, 1e-6));
  }
}

TEST(Compile, ShapelessSlicesKeepTheirBoundsAsGiven) {
  // Bounds counted from the end (and slice_end) move with a new size; the
  // gradient's zeros and SliceUpdate window follow too.
  auto f = [](const std::vector<array>& in) {
    array tail = slice(in[0], {0, -3}, {slice_end, slice_end});
    array mid = slice(in[0], {0, 1}, {2, -1});
    return std::vector<array>{tail, mid};
  };
  auto g = grad([](const std::vector<array>& in) {
    return sum(exp(slice(in[0], {1, -2}, {slice_end, slice_end})));
  });
  auto cf = compile(f, true);
  auto cg = compile(g, true);
  cf({random_array({4, 6}, float32)});
  cg({random_array({4, 6}, float32)});
  for (int n : {9, 5}) {
    auto x = random_array({3, n}, float32);
    auto got = cf({x});
    auto want = f({x});
    ASSERT_EQ(got[0].shape(), (Shape{3, 3}));
    ASSERT_EQ(got[1].shape(), (Shape{2, n - 2}));
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(to_doubles(got[k]), to_doubles(want[k]));
    }
    auto dg = cg({x})[0];
    ASSERT_EQ(dg.shape(), x.shape());
    EXPECT_TRUE(all_close(to_doubles(dg), to_doubles(g({x})[0]), 1e-6, 1e-6));
  }
}

TEST(Compile, ShapelessReductionsWithoutKeepdimsFollowTheNewShape) {
  // The dropped axes are a Squeeze, whose shape follows its input's; an
  // expand_dims after it (as softmax-like code does) is one too.
  int traces = 0;
  auto f = [&](const std::vector<array>& in) {
    ++traces;
    array s = sum(in[0], std::vector<int>{1});           // (a, c)
    array m = max(in[0], std::vector<int>{0, 2});        // (b,)
    array e = expand_dims(mean(in[0], std::vector<int>{2}), 2);  // (a, b, 1)
    return std::vector<array>{s, m, subtract(in[0], e)};
  };
  auto cf = compile(f, true);
  cf({random_array({2, 3, 4}, float32)});
  auto x = random_array({5, 2, 7}, float32);
  auto got = cf({x});
  EXPECT_EQ(traces, 1);
  auto want = f({x});
  ASSERT_EQ(got[0].shape(), (Shape{5, 7}));
  ASSERT_EQ(got[1].shape(), (Shape{2}));
  ASSERT_EQ(got[2].shape(), (Shape{5, 2, 7}));
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-5, 1e-5))
        << k;
  }
  // A new shape that cannot be squeezed the traced way still raises.
  auto bad = compile(
      [](const std::vector<array>& in) {
        return std::vector<array>{squeeze(in[0], 1)};
      },
      true);
  bad({random_array({3, 1}, float32)});
  EXPECT_THROW(bad({random_array({3, 2}, float32)}), std::invalid_argument);
}

TEST(Compile, ShapelessKeysOnRank) {
  int traces = 0;
  auto cf = compile([&](const std::vector<array>& in) {
    ++traces;
    return one(sin(multiply(in[0], in[0])));
  }, true);
  for (int n : {3, 7, 11}) {
    auto x = random_array({n, 2}, float32);
    auto got = cf({x})[0];
    EXPECT_EQ(got.shape(), (Shape{n, 2}));
    auto want = map1(to_doubles(x), [](double v) { return std::sin(v * v); });
    EXPECT_TRUE(all_close(to_doubles(got), want, 1e-6, 1e-6));
  }
  EXPECT_EQ(traces, 1);
  // A primitive that cannot infer shapes raises at trace time.
  auto bad = compile([](const std::vector<array>& in) {
    return one(as_strided(in[0], {2, 2}, {1, 1}, 0));
  }, true);
  EXPECT_THROW(bad({random_array({2, 3}, float32)}), std::invalid_argument);
  // A reshape with a -1 infers it again; one to a fixed shape raises when
  // its input's shape changes.
  auto flat = compile([](const std::vector<array>& in) {
    return std::vector<array>{reshape(in[0], {-1}), reshape(in[0], {3, 2})};
  }, true);
  EXPECT_EQ(flat({random_array({2, 3}, float32)})[1].shape(), (Shape{3, 2}));
  auto x = random_array({4, 5}, float32);
  EXPECT_THROW(flat({x}), std::invalid_argument);
  auto only_flat = compile([](const std::vector<array>& in) {
    return one(reshape(in[0], {-1}));
  }, true);
  only_flat({random_array({2, 3}, float32)});
  auto got = only_flat({x})[0];
  EXPECT_EQ(got.shape(), (Shape{20}));
  EXPECT_EQ(to_doubles(got), to_doubles(x));
}

TEST(Compile, ShapelessRebroadcastsScalarsAndOperands) {
  // relu(x + b): the ops broadcast b and the scalar 0 to the traced shape;
  // replayed on another shape, they broadcast to the new one, in the
  // forward pass and in the gradient's.
  auto f = [](const std::vector<array>& in) {
    return one(maximum(add(in[0], in[1]), array(0.0f)));
  };
  auto cf = compile(f, true);
  auto b = random_array({2}, float32);
  cf({random_array({3, 2}, float32), b});
  for (int n : {7, 1}) {
    auto x = random_array({n, 2}, float32);
    auto got = cf({x, b})[0];
    ASSERT_EQ(got.shape(), (Shape{n, 2}));
    EXPECT_TRUE(all_close(to_doubles(got), to_doubles(f({x, b})[0]), 0, 0));
    auto loss = [](const Fn& g) {
      return [g](const std::vector<array>& v) { return sum(multiply(g(v)[0], v[0])); };
    };
    auto g_c = grad(loss(cf), {0, 1})({x, b});
    auto g_f = grad(loss(f), {0, 1})({x, b});
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(g_c[k].shape(), g_f[k].shape());
      EXPECT_TRUE(all_close(to_doubles(g_c[k]), to_doubles(g_f[k]), 1e-6, 1e-6));
    }
  }
  // A broadcast read by a non-elementwise op keeps its traced shape.
  auto h = [](const std::vector<array>& in) {
    return one(matmul(broadcast_to(in[0], {3, 4}), in[1]));
  };
  auto ch = compile(h, true);
  auto row = random_array({1, 4}, float32);
  for (int n : {2, 5}) {
    auto w = random_array({4, n}, float32);
    auto got = ch({row, w})[0];
    ASSERT_EQ(got.shape(), (Shape{3, n}));
    EXPECT_TRUE(all_close(to_doubles(got), to_doubles(h({row, w})[0]), 1e-6, 1e-6));
  }
}

TEST(Compile, FusesElementwiseRegions) {
  clear_compile_log();
  auto f = [](const std::vector<array>& in) {
    auto a = exp(in[0]);
    auto b = multiply(a, in[1]);
    auto c = add(b, array(2.0f));
    return std::vector<array>{sqrt(abs(c)), sum(b)}; // b escapes to a sum
  };
  auto cf = compile(f);
  auto x = random_array({8}, float32), y = random_array({8}, float32);
  auto text = export_compiled_graph(cf, {x, y});
  // one fused region of the five elementwise ops, the reduction outside
  EXPECT_NE(text.find("Compiled{Exp Multiply Add Abs Sqrt}"), std::string::npos) << text;
  EXPECT_NE(text.find("ReduceSum"), std::string::npos) << text;
  auto got = cf({x, y});
  auto want = f({x, y});
  EXPECT_TRUE(all_close(to_doubles(got[0]), to_doubles(want[0]), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(to_doubles(got[1]), to_doubles(want[1]), 1e-5, 1e-5));
  bool logged = false;
  for (auto& line : compile_log()) logged |= line.find("fused Compiled") != std::string::npos;
  EXPECT_TRUE(logged);
  // Switching the fuse stage off leaves the ops unfused.
  set_compile_stage(CompileStage::fuse, false);
  auto plain = export_compiled_graph(compile(f), {x, y});
  set_compile_stage(CompileStage::fuse, true);
  EXPECT_EQ(plain.find("Compiled"), std::string::npos) << plain;
}

TEST(Compile, TreesOfElementwiseOpsBecomeOneRegion) {
  // tanh(a*b+1)*0.5 + exp(-a) - b*b: two branches meet; one kernel.
  auto f = [](const std::vector<array>& in) {
    auto& a = in[0];
    auto& b = in[1];
    auto left = multiply(tanh(add(multiply(a, b), array(1.0f))), array(0.5f));
    return one(subtract(add(left, exp(negative(a))), multiply(b, b)));
  };
  auto x = random_array({64}, float32), y = random_array({64}, float32);
  auto text = export_compiled_graph(compile(f), {x, y});
  size_t n = 0;
  for (size_t p = text.find("Compiled{"); p != std::string::npos;
       p = text.find("Compiled{", p + 1)) {
    ++n;
  }
  EXPECT_EQ(n, 1u) << text;
  EXPECT_TRUE(all_close(to_doubles(compile(f)({x, y})[0]),
                        to_doubles(f({x, y})[0]), 1e-6, 1e-6));
}

TEST(Compile, SimplifyMergesCommonSubexpressions) {
  auto f = [](const std::vector<array>& in) {
    auto a = exp(in[0]);
    auto b = exp(in[0]);
    return one(add(multiply(a, array(3.0f)), multiply(b, array(3.0f))));
  };
  set_compile_stage(CompileStage::fuse, false);
  auto text = export_compiled_graph(compile(f), {random_array({4}, float32)});
  set_compile_stage(CompileStage::fuse, true);
  size_t n_exp = 0;
  for (size_t p = text.find("Exp"); p != std::string::npos; p = text.find("Exp", p + 1)) ++n_exp;
  EXPECT_EQ(n_exp, 1u) << text;
  size_t n_mul = 0;
  for (size_t p = text.find("Multiply"); p != std::string::npos; p = text.find("Multiply", p + 1)) ++n_mul;
  EXPECT_EQ(n_mul, 1u) << text;
}

TEST(Compile, RandomGraphsMatchEager) {
  // Random elementwise graphs (depth up to 20, mixed dtypes, broadcasting,
  // scalars): compiled equals uncompiled, exactly for integers and bool.
  std::mt19937 g(7);
  for (int trial = 0; trial < 40; ++trial) {
    bool ints = trial % 3 == 0;
    Dtype dt = ints ? int32 : (trial % 3 == 1 ? float32 : float16);
    int depth = 1 + g() % 20;
    std::vector<int> ops(depth), picks(depth);
    for (int i = 0; i < depth; ++i) { ops[i] = g() % 9; picks[i] = g(); }
    auto f = [&](const std::vector<array>& in) {
      std::vector<array> vals = in;
      for (int i = 0; i < depth; ++i) {
        auto& a = vals[picks[i] % vals.size()];
        auto& b = vals[(picks[i] / 7) % vals.size()];
        array r = a;
        switch (ops[i]) {
          case 0: r = add(a, b); break;
          case 1: r = multiply(a, b); break;
          case 2: r = subtract(a, array(2, a.dtype())); break;
          case 3: r = maximum(a, b); break;
          case 4: r = ints ? bitwise_xor(a, b) : tanh(a); break;
          case 5: r = where(greater(a, b), a, b); break;
          case 6: r = ints ? multiply(a, array(3)) : sin(b); break;
          case 7: r = astype(astype(a, ints ? int64 : float32), a.dtype()); break;
          default: r = negative(a); break;
        }
        vals.push_back(r);
      }
      return std::vector<array>{vals.back(), vals[vals.size() / 2]};
    };
    auto x = random_array({3, 4}, dt, -3, 3);
    auto y = random_array({4}, dt, -3, 3);      // broadcast against x
    auto z = as_transposed(random_array({3, 4}, dt, -3, 3));
    auto want = f({x, y, z});
    auto got = compile(f)({x, y, z});
    for (int k = 0; k < 2; ++k) {
      double tol = ints ? 0 : (dt == float16 ? 1e-2 : 1e-5);
      EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), tol, tol))
          << "trial " << trial;
    }
  }
}

TEST(Compile, FusedRegionsNeverDependOnEachOther) {
  // maximum(p, q) joins p's region and maximum(q, p) would join q's: then
  // each region would consume the other's output. The graph stays acyclic
  // (every node's inputs come before it) and the results right.
  auto f = [](const std::vector<array>& in) {
    auto p = multiply(in[0], array(2.0f));
    auto q = multiply(in[1], array(3.0f));
    return std::vector<array>{maximum(p, q), maximum(q, p), exp(p), tanh(q)};
  };
  auto x = random_array({6}, float32), y = random_array({6}, float32);
  std::string text = export_compiled_graph(compile(f), {x, y});
  std::set<std::string> defined = {"in0", "in1"};
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line) && line.find(" = ") != std::string::npos;) {
    std::string args = line.substr(line.find('(') + 1);
    args = args.substr(0, args.find(')'));
    std::istringstream names(args);
    for (std::string n; std::getline(names, n, ',');) {
      n.erase(0, n.find_first_not_of(' '));
      if (n[0] != 'c') EXPECT_TRUE(defined.count(n)) << n << " used before defined:\n" << text;
    }
    std::istringstream outs(line.substr(0, line.find(" = ")));
    for (std::string n; std::getline(outs, n, ',');) {
      n.erase(0, n.find_first_not_of(' '));
      defined.insert(n);
    }
  }
  auto want = f({x, y});
  auto got = compile(f)({x, y});
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]), 1e-6, 1e-6));
  }
}

TEST(Compile, CapturedRandomStateAdvances) {
  random::seed(3);
  auto eager1 = random::uniform({4});
  auto eager2 = random::uniform({4});
  random::seed(3);
  CompileOptions o;
  o.inputs = {random_state()};
  o.outputs = {random_state()};
  auto step = compile([](const std::vector<array>& in) {
    return one(add(random::uniform({4}), in[0]));
  }, o);
  auto zero = zeros({4});
  auto a = step({zero})[0], b = step({zero})[0];
  EXPECT_EQ(to_doubles(a), to_doubles(eager1));
  EXPECT_EQ(to_doubles(b), to_doubles(eager2));
}

TEST(Compile, ComposesWithGradAndVmap) {
  auto f = [](const std::vector<array>& in) {
    return one(sum(multiply(sin(in[0]), exp(in[0]))));
  };
  auto x = random_array({5}, float32);
  auto g_plain = grad([&](const std::vector<array>& v) { return f(v)[0]; })({x})[0];
  auto cf = compile(f);
  auto g_of_c = grad([&](const std::vector<array>& v) { return cf(v)[0]; })({x})[0];
  EXPECT_TRUE(all_close(to_doubles(g_of_c), to_doubles(g_plain), 1e-6, 1e-6));
  auto c_of_g = compile([&](const std::vector<array>& v) {
    return grad([&](const std::vector<array>& w) { return f(w)[0]; })(v);
  });
  EXPECT_TRUE(all_close(to_doubles(c_of_g({x})[0]), to_doubles(g_plain), 1e-6, 1e-6));
  auto xs = random_array({3, 5}, float32);
  auto per = vmap([&](const std::vector<array>& v) { return cf(v); })({xs})[0];
  for (int b = 0; b < 3; ++b) {
    EXPECT_NEAR(to_doubles(per)[b], to_doubles(f({take(xs, b, 0)})[0])[0], 1e-5);
  }
}

TEST(Compile, DisableCompileRunsEagerly) {
  int calls = 0;
  auto cf = compile([&](const std::vector<array>& in) { ++calls; return one(exp(in[0])); });
  auto x = random_array({3}, float32);
  cf({x});
  cf({x});
  EXPECT_EQ(calls, 1);
  disable_compile();
  cf({x});
  cf({x});
  enable_compile();
  EXPECT_EQ(calls, 3);
}

TEST(Compile, SeedBroadcastChainStaysTiny) {
  // Seed 000: the broadcast at the end stays a view; ten iterations touch
  // one element each, compiled or not.
  auto fun = compile([](const std::vector<array>& in) {
    return one(broadcast_to(sin(exp(log(abs(in[0])))), {16384, 2048, 16}));
  });
  auto x = array({1.0f});
  size_t before = get_active_memory();
  reset_peak_memory();
  for (int i = 0; i < 10; ++i) x = fun({x})[0];
  x.eval();
  EXPECT_LT(peak_above(before), 4096u);
  EXPECT_EQ(x.strides(), (Strides{0, 0, 0}));
  EXPECT_EQ(x.data_size(), 1u);
}

TEST(Compile, TransposedInputsGiveSameStridedOutputs) {
  auto cf = compile([](const std::vector<array>& in) {
    return one(add(exp(in[0]), multiply(in[1], array(2.0f))));
  });
  auto a = as_transposed(random_array({16, 8}, float32));
  auto b = as_transposed(random_array({16, 8}, float32));
  auto out = cf({a, b})[0];
  out.eval();
  EXPECT_EQ(out.strides(), a.strides());
  auto want = add(exp(a), multiply(b, array(2.0f)));
  EXPECT_TRUE(all_close(to_doubles(out), to_doubles(want), 1e-6, 1e-6));
  // mixed layouts: correct row-major result
  auto r = random_array({16, 8}, float32);
  auto m = cf({a, r})[0];
  m.eval();
  EXPECT_TRUE(m.flags().row_contiguous);
  EXPECT_TRUE(all_close(to_doubles(m), to_doubles(add(exp(a), multiply(r, array(2.0f)))), 1e-6, 1e-6));
}

TEST(Compile, SeedLinearStepKeepsVectorBias) {
  // Seed 000 in C++: float32 parameters cast to bfloat16, then a Linear with
  // bias. Under compile the AddMM still receives a (N,) bias; x's batch
  // folds into its rows (one GEMM), so the AddMM is 2-d under a reshape.
  int n = 24, k = 16;
  auto w = random_array({n, k}, float32), bias = random_array({n}, float32);
  auto step = [](const std::vector<array>& in) {
    auto wb = astype(in[1], bfloat16), bb = astype(in[2], bfloat16);
    auto x = astype(in[0], bfloat16);
    return one(addmm(bb, x, transpose(wb)));
  };
  auto x = random_array({2, 3, k}, bfloat16);
  auto cf = compile(step);
  auto out = cf({x, w, bias})[0];
  ASSERT_TRUE(out.has_primitive());
  EXPECT_STREQ(out.primitive().name(), "Reshape");
  auto mm = out.inputs()[0];
  ASSERT_TRUE(mm.has_primitive());
  EXPECT_STREQ(mm.primitive().name(), "AddMM");
  EXPECT_EQ(mm.shape(), (Shape{6, n}));
  EXPECT_EQ(mm.inputs()[0].shape(), (Shape{n}));
  auto want = step({x, w, bias})[0];
  EXPECT_TRUE(all_close(to_doubles(out), to_doubles(want), 1e-2, 1e-2));
}

// (a b)^T with no other consumer of a b is written transposed by the GEMM:
// b^T a^T, a row-major result where eager gives a transposed view. Batched
// products too; a product with another consumer, or that is an output
// itself, stays as it is. Results match eager in each case.
TEST(Compile, TransposedProductsBecomeProductsOfTransposes) {
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos;
         p = text.find(what, p + 1)) {
      ++n;
    }
    return n;
  };
  for (Shape sa : {Shape{5, 7}, Shape{3, 5, 7}}) {
    Shape sb = sa;
    sb[sb.size() - 2] = 7;
    sb.back() = 4;
    auto a = random_array(sa, float32), b = random_array(sb, float32);
    std::vector<int> axes(sa.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int>(i);
    std::swap(axes[axes.size() - 1], axes[axes.size() - 2]);
    auto f = [axes](const std::vector<array>& in) {
      return one(multiply(transpose(matmul(in[0], in[1]), axes), array(2.0f)));
    };
    auto out = compile(f)({a, b})[0];
    out.eval();
    auto want = f({a, b})[0];
    want.eval();
    EXPECT_FALSE(want.flags().row_contiguous); // eager: a transposed view
    EXPECT_TRUE(out.flags().row_contiguous) << sa.size() << "-d";
    EXPECT_TRUE(all_close(to_doubles(out), to_doubles(want), 1e-5, 1e-5));
    set_compile_stage(CompileStage::fuse, false);
    auto text = export_compiled_graph(compile(f), {a, b});
    set_compile_stage(CompileStage::fuse, true);
    EXPECT_EQ(count(text, "Matmul"), 1u) << text;
  }
  // The product also feeds an add: left alone (one GEMM, not two).
  auto shared = [](const std::vector<array>& in) {
    auto m = matmul(in[0], in[1]);
    return one(add(transpose(m), m));
  };
  auto a = random_array({6, 6}, float32), b = random_array({6, 6}, float32);
  auto text = export_compiled_graph(compile(shared), {a, b});
  EXPECT_EQ(count(text, "Matmul"), 1u) << text;
  auto got = compile(shared)({a, b})[0];
  EXPECT_TRUE(all_close(to_doubles(got), to_doubles(shared({a, b})[0]), 1e-5,
                        1e-5));
  // The product is an output too.
  auto both = [](const std::vector<array>& in) {
    auto m = matmul(in[0], in[1]);
    return std::vector<array>{m, transpose(m)};
  };
  auto outs = compile(both)({a, b});
  auto eager = both({a, b});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(all_close(to_doubles(outs[i]), to_doubles(eager[i]), 1e-5,
                          1e-5));
  }
}

// The gradient of a Linear weight, x^T dy transposed back to (out, in),
// comes out row-major under compile, so an optimizer's fused update reads
// it contiguously; it matches the eager gradient.
TEST(Compile, LinearWeightGradientIsRowMajor) {
  auto x = random_array({4, 3, 8}, float32), w = random_array({5, 8}, float32);
  auto loss = [](const std::vector<array>& in) {
    return one(sum(square(matmul(in[0], transpose(in[1])))));
  };
  auto g = [loss](const std::vector<array>& in) {
    return std::vector<array>{vjp(loss, in, {array(1.0f)}).second[1]};
  };
  auto got = compile(g)({x, w})[0];
  got.eval();
  auto want = g({x, w})[0];
  EXPECT_TRUE(got.flags().row_contiguous);
  EXPECT_TRUE(all_close(to_doubles(got), to_doubles(want), 1e-4, 1e-4));
}

TEST(Compile, LogExplainsLeftOutOps) {
  clear_compile_log();
  auto cf = compile([](const std::vector<array>& in) {
    return one(sum(multiply(exp(in[0]), in[0])));
  });
  cf({random_array({6}, float32)})[0].eval();
  bool left_out = false;
  for (auto& line : compile_log()) {
    left_out |= line.find("left out ReduceSum: not elementwise") != std::string::npos;
  }
  EXPECT_TRUE(left_out);
}

TEST(Compile, TraceDoesNotKeepTheFirstInputsAlive) {
  auto cf = compile([](const std::vector<array>& in) { return one(exp(in[0])); });
  size_t before = get_active_memory();
  {
    auto x = random_array({1 << 16}, float32);
    cf({x})[0].eval();
  }
  EXPECT_EQ(get_active_memory(), before);
}

TEST(Compile, TracesAreReleasedWithTheFunction) {
  DefaultDeviceScope on_cpu(Device::cpu); // counts host memory
  auto x = random_array({1 << 16}, float32);
  size_t before = get_active_memory();
  {
    auto cf = compile([](const std::vector<array>& in) {
      // A constant subgraph: computed once, then held by the trace.
      auto c = exp(multiply(arange(0.0, 65536.0, 1.0), array(1e-5f)));
      return one(add(in[0], c));
    });
    for (int i = 0; i < 3; ++i) cf({x})[0].eval();
    EXPECT_GE(get_active_memory(), before + (1 << 16) * sizeof(float));
  }
  EXPECT_EQ(get_active_memory(), before);
}

} // namespace
} // namespace kiln::test
