#include "kiln/ops/creation.h"

#include <cmath>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/creation.h"

namespace kiln {

using detail::invalid;

array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s) {
  for (auto d : shape) {
    if (d < 0) invalid("full", "negative dimension in shape " +
                                   detail::shape_str(shape) + ".");
  }
  // Dense, as MLX's: a NumPy view of the result may be written to, and one
  // broadcast element would take every write at once.
  return contiguous(broadcast_to(astype(std::move(vals), dtype, s), shape, s),
                    false, s);
}

array full(Shape shape, array vals, StreamOrDevice s) {
  Dtype dt = vals.dtype();
  return full(std::move(shape), std::move(vals), dt, s);
}

array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(0, dtype), dtype, s);
}

array ones(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(1, dtype), dtype, s);
}

array zeros_like(const array& a, StreamOrDevice s) {
  return full_like(a, array(0, a.dtype()), a.dtype(), s);
}

array ones_like(const array& a, StreamOrDevice s) {
  return full_like(a, array(1, a.dtype()), a.dtype(), s);
}

array full_like(const array& a, const array& vals, std::optional<Dtype> dtype,
                StreamOrDevice s) {
  Dtype dt = dtype.value_or(a.dtype());
  // Under shapeless compile the shape is a's, whatever it becomes.
  if (detail::shape_follows_replay(a)) {
    return contiguous(detail::broadcast_like(astype(vals, dt, s), a, s), false,
                      s);
  }
  return full(a.shape(), vals, dt, s);
}

array arange(double start, double stop, double step, Dtype dtype,
             StreamOrDevice s) {
  if (step == 0) invalid("arange", "step must not be 0.");
  if (std::isnan(start) || std::isnan(stop) || std::isnan(step) ||
      std::isinf(start) || std::isinf(stop)) {
    invalid("arange", "start and stop must be finite and step not NaN; got "
                      "start " + std::to_string(start) + ", stop " +
                          std::to_string(stop) + ", step " +
                          std::to_string(step) + ".");
  }
  if (dtype == bool_) invalid("arange", "not supported for bool.");
  // An infinite step reaches one value, or none (as MLX).
  double n = std::isinf(step)
                 ? ((step > 0) == (start < stop) && start != stop ? 1.0 : 0.0)
                 : std::ceil((stop - start) / step);
  if (n > 2147483647.0) invalid("arange", "too many values.");
  int size = std::max(0, static_cast<int>(n));
  if (is_integral(dtype)) {
    // NumPy's rule for an integer range: the step is
    // dtype(start + step) - dtype(start), so a fractional step may be 0.
    double first = std::trunc(start);
    step = std::isinf(step) ? 0.0 : std::trunc(start + step) - first;
    start = first;
  } else if (std::isinf(step)) {
    step = 0.0;
  }
  auto p = std::make_shared<Arange>(to_stream(s), start, stop, step);
  // A complex range is a real one (the values start + i * step in float64,
  // as the CPU computes them) cast: the range kernels are real.
  if (is_complex(dtype)) {
    return astype(array({size}, float64, std::move(p), {}), dtype, s);
  }
  return array({size}, dtype, std::move(p), {});
}

array arange(double start, double stop, Dtype dtype, StreamOrDevice s) {
  return arange(start, stop, 1.0, dtype, s);
}

array arange(double stop, Dtype dtype, StreamOrDevice s) {
  return arange(0.0, stop, 1.0, dtype, s);
}

array arange(int start, int stop, int step, StreamOrDevice s) {
  return arange(static_cast<double>(start), static_cast<double>(stop),
                static_cast<double>(step), int32, s);
}

array arange(int stop, StreamOrDevice s) { return arange(0, stop, 1, s); }

array linspace(double start, double stop, int num, Dtype dtype,
               StreamOrDevice s) {
  if (num < 0) invalid("linspace", "num must be non-negative, got " +
                                       std::to_string(num) + ".");
  if (num == 1) return astype(array({start}, float64), dtype, s);
  // start + i * step in float64, then cast once: exact endpoints.
  double step = num > 1 ? (stop - start) / (num - 1) : 0.0;
  auto p = std::make_shared<Arange>(to_stream(s), start, stop, step);
  auto values = array({num}, float64, std::move(p), {});
  return astype(values, dtype, s);
}

array tri(int n, std::optional<int> m, int k, Dtype dtype, StreamOrDevice s) {
  int cols = m.value_or(n);
  if (n < 0 || cols < 0) invalid("tri", "sizes must be non-negative.");
  auto rows = reshape(arange(0, n, 1, s), {n, 1}, s);
  auto c = reshape(arange(0, cols, 1, s), {1, cols}, s);
  return astype(greater_equal(add(rows, array(k), s), c, s), dtype, s);
}

array eye(int n, std::optional<int> m, int k, Dtype dtype, StreamOrDevice s) {
  int cols = m.value_or(n);
  if (n < 0 || cols < 0) invalid("eye", "sizes must be non-negative.");
  auto rows = reshape(arange(0, n, 1, s), {n, 1}, s);
  auto c = reshape(arange(0, cols, 1, s), {1, cols}, s);
  return astype(equal(add(rows, array(k), s), c, s), dtype, s);
}

std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse,
                            const std::string& indexing, StreamOrDevice s) {
  if (indexing != "xy" && indexing != "ij") {
    invalid("meshgrid",
            "indexing must be 'xy' or 'ij', got '" + indexing + "'.");
  }
  int nd = static_cast<int>(arrays.size());
  std::vector<array> flat;
  Shape full_shape;
  for (auto& a : arrays) {
    flat.push_back(reshape(a, {-1}, s));
    full_shape.push_back(flat.back().shape(0));
  }
  // Cartesian indexing puts the second array along the first axis.
  bool swap = indexing == "xy" && nd > 1;
  if (swap) std::swap(full_shape[0], full_shape[1]);
  std::vector<array> out;
  for (int i = 0; i < nd; ++i) {
    int axis = swap && i < 2 ? 1 - i : i;
    Shape shape(nd, 1);
    shape[axis] = flat[i].shape(0);
    auto g = reshape(flat[i], shape, s);
    out.push_back(sparse ? g : broadcast_to(g, full_shape, s));
  }
  return out;
}

array identity(int n, Dtype dtype, StreamOrDevice s) {
  return eye(n, n, 0, dtype, s);
}

namespace {
array triangle_mask(const array& x, int k, const char* op, StreamOrDevice s) {
  if (x.ndim() < 2) invalid(op, "needs an array with at least 2 dimensions.");
  return tri(x.shape(-2), x.shape(-1), k, bool_, s);
}
} // namespace

array tril(const array& x, int k, StreamOrDevice s) {
  auto mask = triangle_mask(x, k, "tril", s);
  return where(mask, x, zeros_like(x, s), s);
}

array triu(const array& x, int k, StreamOrDevice s) {
  auto mask = triangle_mask(x, k - 1, "triu", s);
  return where(mask, zeros_like(x, s), x, s);
}

} // namespace kiln
