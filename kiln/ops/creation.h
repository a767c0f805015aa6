// Ops that create arrays.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** An array of the shape filled with vals (broadcast), cast to dtype. The
 *  result is a broadcast view: it costs one element of memory. */
array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s = {});
array full(Shape shape, array vals, StreamOrDevice s = {});
template <typename T>
array full(Shape shape, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val, dtype), dtype, s);
}
template <typename T>
array full(Shape shape, T val, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val), s);
}
array zeros(const Shape& shape, Dtype dtype = float32, StreamOrDevice s = {});
array ones(const Shape& shape, Dtype dtype = float32, StreamOrDevice s = {});
array zeros_like(const array& a, StreamOrDevice s = {});
array ones_like(const array& a, StreamOrDevice s = {});
array full_like(const array& a, const array& vals,
                std::optional<Dtype> dtype = std::nullopt,
                StreamOrDevice s = {});

/** Values start, start + step, ... below stop (as NumPy's arange). */
array arange(double start, double stop, double step, Dtype dtype = float32,
             StreamOrDevice s = {});
array arange(double start, double stop, Dtype dtype = float32,
             StreamOrDevice s = {});
array arange(double stop, Dtype dtype = float32, StreamOrDevice s = {});
array arange(int start, int stop, int step = 1, StreamOrDevice s = {});
array arange(int stop, StreamOrDevice s = {});

/** num evenly spaced values over [start, stop]. */
array linspace(double start, double stop, int num = 50, Dtype dtype = float32,
               StreamOrDevice s = {});

/** Ones on the k-th diagonal of an n x m matrix. */
array eye(int n, std::optional<int> m = std::nullopt, int k = 0,
          Dtype dtype = float32, StreamOrDevice s = {});
array identity(int n, Dtype dtype = float32, StreamOrDevice s = {});
/** Coordinate grids from 1-d arrays (others are flattened): "xy"
 *  (Cartesian, the first two output axes swapped) or "ij" (matrix)
 *  indexing. Sparse grids keep size 1 on all but their own axis; dense
 *  ones are broadcast views. */
std::vector<array> meshgrid(const std::vector<array>& arrays,
                            bool sparse = false,
                            const std::string& indexing = "xy",
                            StreamOrDevice s = {});

/** Ones at and below the k-th diagonal. */
array tri(int n, std::optional<int> m = std::nullopt, int k = 0,
          Dtype dtype = float32, StreamOrDevice s = {});
/** Lower / upper triangle of the last two axes. */
array tril(const array& x, int k = 0, StreamOrDevice s = {});
array triu(const array& x, int k = 0, StreamOrDevice s = {});

} // namespace kiln
