// Function export from C++: a round trip on fresh inputs, several traces,
// shapeless replay at a new shape, and a truncated file that raises.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "kiln/kiln.h"
#include "tests/test_utils.h"

namespace kiln {
namespace {

std::string temp_path(const char* name) {
  return ::testing::TempDir() + name;
}

ExportedFn gelu_like() {
  return [](const Args& a, const Kwargs& kw) {
    array x = add(a[0], kw.at("bias"));
    return std::vector<array>{multiply(x, sigmoid(multiply(array(1.702f), x)))};
  };
}

TEST(FunctionExport, RoundTripOnFreshInputs) {
  auto path = temp_path("fe_roundtrip.mlxfn");
  auto fun = gelu_like();
  export_function(path, fun, {random::normal({3, 5})},
                  {{"bias", random::normal({5})}});
  auto imported = import_function(path);
  array x = random::normal({3, 5}), b = random::normal({5});
  array got = imported({x}, {{"bias", b}})[0];
  array want = fun({x}, {{"bias", b}})[0];
  EXPECT_TRUE(allclose(got, want, 1e-6, 1e-6).item<bool>());
  EXPECT_THROW(imported({x}), std::invalid_argument);
}

TEST(FunctionExport, ShapelessAndSeveralTraces) {
  auto path = temp_path("fe_shapeless.mlxfn");
  ExportedFn sum_all = [](const Args& a, const Kwargs&) {
    array s = array(0.0f);
    for (auto& x : a) s = add(s, sum(x, 0));
    return std::vector<array>{s};
  };
  auto ex = exporter(path, sum_all, true, "meta");
  ex({ones({4})});
  ex({ones({4}), ones({2})});
  EXPECT_THROW(ex({ones({7})}), std::runtime_error); // same signature
  auto imported = import_function(path);
  EXPECT_EQ(imported.metadata(), "meta");
  EXPECT_FLOAT_EQ(imported({ones({9})})[0].item<float>(), 9.0f);
  EXPECT_FLOAT_EQ(imported({ones({3}), ones({5})})[0].item<float>(), 8.0f);
}

TEST(FunctionExport, TruncatedFileRaises) {
  auto path = temp_path("fe_trunc.mlxfn");
  export_function(path, gelu_like(), {ones({2, 2})}, {{"bias", ones({2})}});
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), {});
  for (size_t n = 0; n < data.size(); n += 3) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(data.data(), n);
    EXPECT_THROW(import_function(path), std::exception) << n;
  }
  std::remove(path.c_str());
}

} // namespace
} // namespace kiln
