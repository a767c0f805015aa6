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

  // Fit y = w x + b to noisy data with hand-written gradients.
  int n = 4096;
  auto xs = linspace(-1, 1, n);
  auto noise = multiply(sin(multiply(xs, array(137.0f))), array(0.05f));
  auto ys = add(add(multiply(xs, array(3.0f)), array(2.0f)), noise);
  array w(0.0f), b(0.0f);
  float lr = 0.5f;
  for (int step = 0; step <= 200; ++step) {
    auto err = subtract(add(multiply(w, xs), b), ys);
    auto loss = mean(square(err));
    auto gw = mean(multiply(err, xs)) * 2.0f;
    auto gb = mean(err) * 2.0f;
    w = subtract(w, gw * lr);
    b = subtract(b, gb * lr);
    eval(w, b, loss);
    if (step % 50 == 0) {
      std::cout << "step " << step << "  loss " << loss.item<float>()
                << "  w " << w.item<float>() << "  b " << b.item<float>()
                << "\n";
    }
  }
  return 0;
}
