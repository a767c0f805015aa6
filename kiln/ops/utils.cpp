#include "kiln/ops/utils.h"

#include <algorithm>
#include <stdexcept>

namespace kiln::detail {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) {
    os << s[i] << (s.size() == 1 ? "," : (i + 1 < s.size() ? ", " : ""));
  }
  os << ")";
  return os.str();
}

std::string describe(const array& a) {
  return dtype_name(a.dtype()) + " array of shape " + shape_str(a.shape());
}

void invalid(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("[" + op + "] " + msg);
}

int32_t checked_dim(int64_t size, const std::string& op) {
  if (size > INT32_MAX || size < INT32_MIN) {
    throw std::overflow_error("[" + op + "] the size " + std::to_string(size) +
                              " does not fit in int32.");
  }
  return static_cast<int32_t>(size);
}

int normalize_axis(int axis, int ndim, const char* op) {
  if (axis < -ndim || axis >= ndim) {
    invalid(op, "axis " + std::to_string(axis) +
                    " is out of range for an array with " +
                    std::to_string(ndim) + " dimensions.");
  }
  return axis < 0 ? axis + ndim : axis;
}

std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim,
                                const char* op) {
  std::vector<int> out;
  for (int ax : axes) out.push_back(normalize_axis(ax, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    invalid(op, "duplicate axes.");
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      invalid(op, "shapes " + shape_str(a) + " and " + shape_str(b) +
                      " cannot be broadcast together.");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Dtype at_least_float(Dtype d) { return is_inexact(d) ? d : float32; }

} // namespace kiln::detail
