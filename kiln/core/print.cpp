#include "kiln/core/print.h"

#include <atomic>
#include <iomanip>
#include <sstream>
#include <string>

#include "kiln/core/cast.h"
#include "kiln/core/dispatch.h"

namespace kiln {

namespace {

// Global, as MLX: one setting for every thread.
std::atomic<int> print_precision{-1};

void set_float_format(std::ostream& os) {
  int p = print_precision.load();
  if (p >= 0) {
    os << std::fixed << std::setprecision(p);
  } else {
    os << std::setprecision(6);
  }
}

template <typename T>
std::string format_value(T v) {
  std::ostringstream os;
  if constexpr (is_complex_v<T> || std::is_floating_point_v<compute_t<T>>) {
    set_float_format(os);
  }
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, int8_t> ||
                       std::is_same_v<T, uint8_t>) {
    os << static_cast<int>(v);
  } else if constexpr (is_complex_v<T>) {
    os << v.real() << (v.imag() < 0 ? "-" : "+") << std::abs(v.imag()) << "j";
  } else if constexpr (std::is_integral_v<T>) {
    os << v;
  } else {
    double d = static_cast<double>(static_cast<compute_t<T>>(v));
    os << d;
  }
  return os.str();
}

template <typename T>
void print_rec(std::ostream& os, const array& a, int dim, int64_t offset,
               int indent) {
  const T* data = a.data<T>();
  if (a.ndim() == 0) {
    os << format_value(data[0]);
    return;
  }
  int n = a.shape(dim);
  int64_t stride = a.strides()[dim];
  os << "[";
  // As MLX prints: an axis longer than 6 shows its first and last 3
  // entries around "...", and nested rows start on the next line.
  bool inner = dim + 1 == static_cast<int>(a.ndim());
  std::string row_break = ",\n" + std::string(indent + 1, ' ');
  for (int i = 0; i < n; ++i) {
    if (n > 6 && i == 3) {
      os << "..." << (inner ? ", " : row_break);
      i = n - 3;
    }
    if (inner) {
      os << format_value(data[offset + i * stride]);
    } else {
      print_rec<T>(os, a, dim + 1, offset + i * stride, indent + 1);
    }
    if (i + 1 < n) os << (inner ? ", " : row_break);
  }
  os << "]";
}

} // namespace

PrintOptions get_print_options() { return {print_precision.load()}; }

void set_print_options(const PrintOptions& options) {
  print_precision.store(options.precision);
}

std::ostream& operator<<(std::ostream& os, array a) {
  a.eval();
  os << "array(";
  dispatch_type(a.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    print_rec<T>(os, a, 0, 0, 6);
  });
  return os << ", dtype=" << a.dtype() << ")";
}

} // namespace kiln
