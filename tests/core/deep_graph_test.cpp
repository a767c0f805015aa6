// Graphs a million nodes deep, of every shape that once recursed per node:
// repeated inputs, sibling outputs, gradient graphs and compiled traces.
// Each is built, then destroyed unevaluated, or evaluated and destroyed; a
// recursion per node would overflow the 8 MB main-thread stack long before.
#include "kiln/transforms/autograd.h"
#include "kiln/transforms/compile.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

constexpr int kDeep = 1000000;

array chain_of_repeated_inputs(int n) {
  auto x = array(1.0f);
  for (int i = 0; i < n; ++i) x = add(x, x);
  return x;
}

TEST(DeepGraph, RepeatedInputsDestroyedUnevaluated) {
  auto x = chain_of_repeated_inputs(kDeep);
  x = array(0.0f);
  auto y = array(1.0f);
  for (int i = 0; i < kDeep; ++i) y = maximum(y, y);
  y = array(0.0f);
  SUCCEED();
}

TEST(DeepGraph, RepeatedInputsEvaluated) {
  // 2^n overflows to inf after 128 doublings; maximum keeps the value.
  auto x = chain_of_repeated_inputs(kDeep);
  EXPECT_TRUE(std::isinf(x.item<float>()));
  auto y = array(3.0f);
  for (int i = 0; i < kDeep; ++i) y = maximum(y, y);
  EXPECT_EQ(y.item<float>(), 3.0f);
}

TEST(DeepGraph, SiblingOutputs) {
  auto base = array({1.0f, 2.0f, 3.0f, 4.0f});
  auto x = base;
  for (int i = 0; i < kDeep; ++i) x = concatenate(split(x, 2, 0), 0);
  x = array(0.0f); // unevaluated
  x = base;
  for (int i = 0; i < kDeep / 4; ++i) {
    auto parts = split(x, 2, 0);
    x = concatenate({multiply(parts[0], parts[1]), parts[1]}, 0);
  }
  // [1,2,3,4] -> [3,8,3,4] -> [9,32,3,4] -> ... (the first half is the
  // product of the halves): evaluate a short version to check the values.
  auto y = base;
  for (int i = 0; i < 3; ++i) {
    auto parts = split(y, 2, 0);
    y = concatenate({multiply(parts[0], parts[1]), parts[1]}, 0);
  }
  EXPECT_EQ(to_doubles(y), (std::vector<double>{27, 128, 3, 4}));
  eval({x});
  x = array(0.0f);
}

TEST(DeepGraph, GradientOfADeepChain) {
  // d/dx of ((x + x) * 0.5) repeated is 1 at any depth.
  auto f = [](const array& x) {
    auto y = x;
    for (int i = 0; i < kDeep / 4; ++i) y = multiply(add(y, y), array(0.5f));
    return y;
  };
  {
    auto [out, grad] = vjp(f, array(2.0f), array(1.0f));
    // Destroyed unevaluated at the end of the scope.
  }
  auto [out, grad] = vjp(f, array(2.0f), array(1.0f));
  EXPECT_EQ(out.item<float>(), 2.0f);
  EXPECT_EQ(grad.item<float>(), 1.0f);
}

TEST(DeepGraph, CompiledDeepTrace) {
  auto f = [](const std::vector<array>& in) {
    auto y = in[0];
    for (int i = 0; i < kDeep / 4; ++i) y = maximum(y, y);
    return std::vector<array>{y};
  };
  {
    auto g = compile(f);
    EXPECT_EQ(g({array(5.0f)})[0].item<float>(), 5.0f);
    EXPECT_EQ(g({array(-1.0f)})[0].item<float>(), -1.0f);
  } // the compiled function and its trace die here
  SUCCEED();
}

} // namespace
} // namespace kiln::test
