// Functions whose compiled form is one fused region, by dtype family: the
// GPU tests run them compiled on the GPU against the CPU, and the NVRTC
// tests compile their generated kernels without a GPU. The rows cases read
// per-row and per-column broadcasts next to full arrays (the rows kernel).
#pragma once

#include <string>
#include <vector>

#include "test_utils.h"

namespace kiln::test {

struct RegionCase {
  std::string name;
  Fn f;                      // two inputs of one dtype
  std::vector<Dtype> dtypes; // the dtypes it serves
  double lo, hi;             // input range
};

inline array scalar_like(double v, const array& x) { return array(v, x.dtype()); }

inline const std::vector<Dtype>& all_dtypes_but_bool() {
  static const std::vector<Dtype> v(all_dtypes().begin() + 1,
                                    all_dtypes().end());
  return v;
}

/** A float16/bfloat16 partner for astype round trips. */
inline Dtype other_half(Dtype d) { return d == float16 ? bfloat16 : float16; }

inline const std::vector<RegionCase>& region_cases() {
  static const std::vector<RegionCase> cases = {
      {"tanh_fma",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         auto& y = in[1];
         return std::vector<array>{
             tanh(x * y + scalar_like(1, x)) * scalar_like(0.5, x) + x};
       },
       float_dtypes(), -2, 2},
      {"unary_chain",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         return std::vector<array>{
             sin(exp(log(abs(x) + scalar_like(1, x)))) + sigmoid(in[1])};
       },
       float_dtypes(), -2, 2},
      {"binary_math",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         auto& y = in[1];
         return std::vector<array>{
             power(abs(x) + scalar_like(0.5, x), y) + logaddexp(x, y) -
             arctan2(x, y) + maximum(x, y) / (abs(y) + scalar_like(1, y))};
       },
       float_dtypes(), -2, 2},
      {"where_compare",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         auto& y = in[1];
         return std::vector<array>{
             where(x > y, x * scalar_like(2, x), y - x)};
       },
       all_dtypes_but_bool(), -20, 20},
      {"astype_middle",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         Dtype mid = issubdtype(x.dtype(), floating) ? other_half(x.dtype())
                                                      : float32;
         auto m = astype(x, mid) * array(3.0, mid);
         return std::vector<array>{astype(m, x.dtype()) + in[1]};
       },
       all_dtypes_but_bool(), -20, 20},
      {"compare_to_bool",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         auto& y = in[1];
         return std::vector<array>{
             logical_and(x >= y, x != scalar_like(0, x)) ||
             logical_not(y < scalar_like(1, y))};
       },
       all_dtypes(), -20, 20},
      {"integer_arithmetic",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         auto& y = in[1];
         return std::vector<array>{
             (x + y) * scalar_like(3, x) - floor_divide(x, y) +
             remainder(x, y) + minimum(x, y) * sign(x) + square(abs(y))};
       },
       int_dtypes(), -20, 20},
      {"bitwise_and_shifts",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         auto& y = in[1];
         return std::vector<array>{
             ((x & y) | (x ^ scalar_like(3, x))) << scalar_like(1, x) |
             (~x >> scalar_like(2, x))};
       },
       int_dtypes(), -20, 20},
      {"bool_logic",
       [](const std::vector<array>& in) {
         auto& x = in[0];
         auto& y = in[1];
         return std::vector<array>{
             logical_or(logical_not(x), y) != (x && y)};
       },
       {bool_}, 0, 2},
      {"two_outputs",
       [](const std::vector<array>& in) {
         auto t = in[0] * in[1];
         return std::vector<array>{exp(t) + scalar_like(1, t),
                                   t - in[0] * scalar_like(2, t)};
       },
       float_dtypes(), -2, 2},
  };
  return cases;
}

/** A region over (..., n) whose inputs are full arrays ('x'), one value
 *  per row of shape (..., 1) ('r') or one per column of shape (n,) ('c'). */
struct RowsCase {
  std::string name;
  Fn f;
  std::string kinds; // one letter per input
  std::vector<Dtype> dtypes;
  double lo = -2, hi = 2;
};

/** Inputs of c for a region of `shape` (at least 1-d), in dtype dt. */
inline std::vector<array> rows_inputs(const RowsCase& c, const Shape& shape,
                                      Dtype dt) {
  Shape per_row = shape;
  per_row.back() = 1;
  std::vector<array> in;
  for (char k : c.kinds) {
    Shape s = k == 'x' ? shape : k == 'r' ? per_row : Shape{shape.back()};
    in.push_back(random_array(s, dt, c.lo, c.hi));
  }
  return in;
}

inline const std::vector<RowsCase>& rows_cases() {
  static const std::vector<Dtype> halves_and_float32 = {float32, float16,
                                                        bfloat16};
  static const std::vector<RowsCase> cases = {
      // LayerNorm's backward: (x - mean) * rstd * w * g.
      {"layernorm_backward",
       [](const std::vector<array>& in) {
         return std::vector<array>{(in[0] - in[1]) * in[2] * in[3] * in[4]};
       },
       "xrrcx", halves_and_float32},
      // Softmax's backward: y * (g - sum(y * g)).
      {"softmax_backward",
       [](const std::vector<array>& in) {
         return std::vector<array>{in[0] * (in[1] - in[2])};
       },
       "xxr", halves_and_float32},
      // Cross-entropy's gradient: exp(x - lse) * g, per-row lse and g.
      {"cross_entropy_gradient",
       [](const std::vector<array>& in) {
         return std::vector<array>{exp(in[0] - in[1]) * in[2]};
       },
       "xrr", halves_and_float32},
      // Two outputs: a bias and scale, and a centered product.
      {"two_outputs",
       [](const std::vector<array>& in) {
         return std::vector<array>{in[0] * in[1] + in[2],
                                   (in[0] - in[3]) * in[1]};
       },
       "xccr", halves_and_float32},
      {"integer_rows",
       [](const std::vector<array>& in) {
         return std::vector<array>{(in[0] - in[1]) * in[2] +
                                   scalar_like(3, in[0])};
       },
       // Small values: int8 products stay in range.
       "xrc", {int32, int8, int64, uint16}, -5, 5},
      {"bool_rows",
       [](const std::vector<array>& in) {
         return std::vector<array>{logical_or(logical_and(in[0], in[1]),
                                              logical_not(in[2]))};
       },
       "xrc", {bool_}, 0, 2},
  };
  return cases;
}

} // namespace kiln::test
