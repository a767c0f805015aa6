// Reference helpers for the slicing, indexing and sorting tests: n-d index
// arithmetic over row-major double vectors and an exception check.
#pragma once

#include <string>
#include <vector>

#include "test_utils.h"

namespace kiln::test {

/** Row-major multi-index of flat position i in shape. */
inline std::vector<int64_t> unravel(size_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = static_cast<int64_t>(i % shape[d]);
    i /= shape[d];
  }
  return idx;
}

/** Flat row-major position of a multi-index in shape. */
inline size_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  size_t pos = 0;
  for (size_t d = 0; d < shape.size(); ++d) pos = pos * shape[d] + idx[d];
  return pos;
}

/** The values of an array with its shape, for reference loops. */
struct Ref {
  Shape shape;
  std::vector<double> v;
  explicit Ref(const array& a) : shape(a.shape()), v(to_doubles(a)) {}
  double at(const std::vector<int64_t>& idx) const {
    return v[ravel(idx, shape)];
  }
};

/** f() throws std::invalid_argument whose message names "[op]", while
 *  building the graph (nothing is evaluated). */
template <typename F>
::testing::AssertionResult throws_naming(F&& f, const std::string& op) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    if (msg.find("[" + op + "]") != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "message does not name " << op << ": " << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "wrong exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception for " << op;
}

} // namespace kiln::test
