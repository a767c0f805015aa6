// Functions whose compiled form is one fused region, by dtype family: the
// GPU tests run them compiled on the GPU against the CPU, and the NVRTC
// tests compile their generated kernels without a GPU.
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

} // namespace kiln::test
