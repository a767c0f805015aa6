// Argument checking and normalization shared by the ops.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"
#include "kiln/core/gpu_fallback.h"

namespace kiln::detail {

std::string shape_str(const Shape& s);
/** "float32 array of shape (2, 3)" for error messages. */
std::string describe(const array& a);

/** Throws invalid_argument "[op] msg". */
[[noreturn]] void invalid(const std::string& op, const std::string& msg);

/** A computed dimension as int32; throws overflow_error "[op] the size N
 *  does not fit in int32." otherwise. */
int32_t checked_dim(int64_t size, const std::string& op);

/** Axis in [-ndim, ndim) mapped to [0, ndim); throws naming op otherwise. */
int normalize_axis(int axis, int ndim, const char* op);
/** Normalized, sorted, duplicate-free axes. */
std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim,
                                const char* op);

/** NumPy broadcasting of two shapes; throws naming op and both shapes. */
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/** Integers and bool become float32; inexact types are kept. */
Dtype at_least_float(Dtype d);

/** The primitive P(s, args...) for these inputs, or P on the CPU's default
 *  stream where s is a GPU stream whose kernels decline them
 *  (Primitive::gpu_declines): the GPU's fallback, chosen as the graph is
 *  built and reported by gpu_fallback (KILN_DEBUG, KILN_GPU_STRICT). */
template <typename P, typename... Args>
std::shared_ptr<P> placed(Stream s, const std::vector<array>& inputs,
                          const Args&... args) {
  auto p = std::make_shared<P>(s, args...);
  if (s.device == Device::gpu) {
    std::string why = p->gpu_declines(inputs);
    if (!why.empty()) {
      gpu_fallback(p->name(), why);
      p = std::make_shared<P>(default_stream(Device::cpu), args...);
    }
  }
  return p;
}

} // namespace kiln::detail
