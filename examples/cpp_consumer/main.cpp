// Built against the installed package (find_package(kiln) or pkg-config):
// a least-squares fit by gradient descent, printing the fitted slope and
// intercept and exiting non-zero unless they are right.
#include <cmath>
#include <filesystem>
#include <string>

#include <unistd.h>
#include <iostream>

#include "kiln/kiln.h"

using namespace kiln;

int main() {
  // y = 3x - 1 on 64 points.
  array x = linspace(-1, 1, 64);
  array y = subtract(multiply(array(3.0f), x), array(1.0f));
  auto loss = [&](const std::vector<array>& p) {
    array pred = add(multiply(p[0], x), p[1]);
    return std::vector<array>{mean(square(subtract(pred, y)))};
  };
  std::vector<array> params = {array(0.0f), array(0.0f)};
  auto step = value_and_grad(loss, std::vector<int>{0, 1});
  for (int i = 0; i < 500; ++i) {
    auto [value, grads] = step(params);
    for (size_t j = 0; j < params.size(); ++j) {
      params[j] = subtract(params[j], multiply(array(0.5f), grads[j]));
    }
    eval(params);
  }
  float w = params[0].item<float>(), b = params[1].item<float>();
  std::cout << "slope " << w << ", intercept " << b << "\n";
  if (std::abs(w - 3.0f) > 1e-3f || std::abs(b + 1.0f) > 1e-3f) return 1;

  // The fitted model as a file (MLX's .mlxfn layout), read back and run:
  // a deployment needs only the file and the library.
  auto predict = [&](const Args& in, const Kwargs&) {
    return std::vector<array>{add(multiply(params[0], in[0]), params[1])};
  };
  auto file = (std::filesystem::temp_directory_path() / ("kiln_fit_" + std::to_string(::getpid()) + ".mlxfn")).string();
  export_function(file, predict, {array({0.0f, 2.0f})}, {}, true);
  auto imported = import_function(file);
  array out = imported({array({1.0f, 2.0f, 3.0f})})[0];
  float y3 = take(out, 2).item<float>();
  std::filesystem::remove(file);
  std::cout << "imported model at x = 3: " << y3 << "\n";
  return std::abs(y3 - 8.0f) < 1e-2f ? 0 : 1;
}
