// Shared by the GPU tests: skip cleanly where there is no GPU (a CPU-only
// build or a machine without one), and compare an op run on the GPU with the
// same op on the CPU backend, values and output layout.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "test_utils.h"

namespace kiln::test {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu::is_available()) GTEST_SKIP() << "no GPU";
  }
};

using DeviceFn = std::function<array(const std::vector<array>&, Device)>;

/** Runs fn on the GPU and on the CPU over the same inputs and checks equal
 *  shapes, dtypes and strides (the layout rules are the same on both) and
 *  values within tol (0: exact). */
inline ::testing::AssertionResult same_on_devices(
    const DeviceFn& fn, const std::vector<array>& inputs, double tol,
    bool check_strides = true) {
  array g = fn(inputs, Device::gpu);
  array c = fn(inputs, Device::cpu);
  eval({g, c});
  if (g.shape() != c.shape() || g.dtype() != c.dtype()) {
    return ::testing::AssertionFailure()
           << "shape/dtype differ: gpu " << g << " cpu " << c;
  }
  if (check_strides && g.strides() != c.strides()) {
    return ::testing::AssertionFailure() << "strides differ";
  }
  if (check_strides && g.data_size() != c.data_size()) {
    return ::testing::AssertionFailure()
           << "data_size differs: gpu " << g.data_size() << " cpu "
           << c.data_size();
  }
  if (g.dtype() == complex64) {
    // The parts compared on the CPU.
    auto re = all_close(to_doubles(real(g, Device::cpu)),
                        to_doubles(real(c, Device::cpu)), tol, tol);
    if (!re) return re << " (real parts)";
    auto im = all_close(to_doubles(imag(g, Device::cpu)),
                        to_doubles(imag(c, Device::cpu)), tol, tol);
    if (!im) return im << " (imaginary parts)";
    return im;
  }
  return all_close(to_doubles(g), to_doubles(c), tol, tol);
}

/** The layouts every elementwise op meets, all of a's shape: a itself,
 *  transposed, a strided slice (of a next to itself), and a row broadcast.
 *  Shapes are 2-d (rows, cols). */
inline std::vector<std::pair<std::string, array>> layouts(const array& a) {
  int r = a.shape(0), c = a.shape(1);
  array twice = concatenate({a, a}, 1);
  return {
      {"contiguous", a},
      {"transposed", as_transposed(a)},
      {"sliced", slice(twice, Shape{0, 1}, Shape{r, 2 * c}, Shape{1, 2})},
      {"broadcast", broadcast_to(slice(a, Shape{0, 0}, Shape{1, c}), {r, c})},
  };
}

} // namespace kiln::test
