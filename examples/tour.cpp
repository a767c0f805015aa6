// A short tour of kiln's C++ API: lazy arrays, layouts that avoid copies,
// and a small model fitted by gradient descent.
#include <chrono>
#include <iostream>

#include "kiln/kiln.h"

using namespace kiln;

int main() {
  // Arrays are lazy: nothing is computed until a value is needed.
  auto x = arange(0.0, 1.0, 0.125);
  auto y = exp(multiply(x, array(2.0f)));
  std::cout << "exp(2x) = " << y << "\n";

  // Broadcasts are views, and elementwise ops keep their layout: this is one
  // element of work and one element of memory, not 2 GiB.
  reset_peak_memory();
  auto big = broadcast_to(array({1.0f}), {16384, 2048, 16});
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) big = sin(exp(log(abs(big))));
  big.eval();
  auto dt = std::chrono::duration<double, std::milli>(
      std::chrono::steady_clock::now() - t0);
  std::cout << "10 passes over a (16384, 2048, 16) broadcast: " << dt.count()
            << " ms, peak memory " << get_peak_memory() << " bytes\n";

  // Fit a small MLP to y = sin(3x) with value_and_grad, one compiled step.
  int n = 256, hidden = 32;
  auto xs = reshape(linspace(-1, 1, n), {n, 1});
  auto ys = sin(multiply(xs, array(3.0f)));
  random::seed(0);
  std::vector<array> params = {
      random::uniform(array(-1.0f), array(1.0f), {1, hidden}), zeros({hidden}),
      random::uniform(array(-0.3f), array(0.3f), {hidden, 1}), zeros({1})};
  auto loss_fn = [&](const std::vector<array>& p) {
    auto h = tanh(add(matmul(xs, p[0]), p[1]));
    return mean(square(subtract(add(matmul(h, p[2]), p[3]), ys)));
  };
  auto loss_and_grads = value_and_grad(loss_fn, std::vector<int>{0, 1, 2, 3});
  // One step: the loss, then the updated parameters; compiled once.
  auto step = compile([&](const std::vector<array>& p) {
    auto [loss, grads] = loss_and_grads(p);
    std::vector<array> out = {loss};
    for (size_t k = 0; k < p.size(); ++k) {
      out.push_back(subtract(p[k], multiply(grads[k], array(0.1f))));
    }
    return out;
  });
  for (int it = 0; it <= 2000; ++it) {
    auto out = step(params);
    params.assign(out.begin() + 1, out.end());
    eval(out);
    if (it % 500 == 0) {
      std::cout << "step " << it << "  loss " << out[0].item<float>() << "\n";
    }
  }
  return 0;
}
