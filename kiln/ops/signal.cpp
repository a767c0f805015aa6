#include "kiln/ops/signal.h"

#include <array>
#include <bit>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "kiln/ops/conv.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"

namespace kiln {

using detail::describe;
using detail::invalid;

namespace {

// The window points 2 pi n / (M - 1), n = 0..M-1 (M > 1), and a weighted
// sum of cosines of multiples of them: sum_k c_k cos(k x).
array cosine_window(int M, std::initializer_list<double> coeffs,
                    StreamOrDevice s) {
  if (M < 1) return zeros({0}, float32, s);
  if (M == 1) return ones({1}, float32, s);
  auto x =
      multiply(arange(0.0, M, 1.0, float32, s),
               array(static_cast<float>(2 * std::numbers::pi / (M - 1))), s);
  std::optional<array> w;
  int k = 0;
  for (double c : coeffs) {
    auto term = k == 0 ? full({M}, array(static_cast<float>(c)), s)
                       : multiply(array(static_cast<float>(c)),
                                  cos(multiply(x, array(float(k)), s), s), s);
    w = w ? add(*w, term, s) : term;
    ++k;
  }
  return *w;
}

} // namespace

array bartlett(int M, StreamOrDevice s) {
  if (M < 1) return zeros({0}, float32, s);
  if (M == 1) return ones({1}, float32, s);
  // 1 - |2n / (M - 1) - 1|
  auto n = arange(0.0, M, 1.0, float32, s);
  auto r = subtract(multiply(n, array(2.0f / (M - 1)), s), array(1.0f), s);
  return subtract(array(1.0f), abs(r, s), s);
}

array blackman(int M, StreamOrDevice s) {
  return cosine_window(M, {0.42, -0.5, 0.08}, s);
}

array hamming(int M, StreamOrDevice s) {
  return cosine_window(M, {0.54, -0.46}, s);
}

array hanning(int M, StreamOrDevice s) {
  return cosine_window(M, {0.5, -0.5}, s);
}

array convolve(const array& a, const array& v, const std::string& mode,
               StreamOrDevice s) {
  const char* op = "convolve";
  if (a.ndim() != 1 || v.ndim() != 1) {
    invalid(op, "inputs must be 1-d, got " + describe(a) + " and " +
                    describe(v) + ".");
  }
  if (!is_floating_point(a.dtype()) || !is_floating_point(v.dtype())) {
    invalid(op, "inputs must be floating point, got " + describe(a) + " and " +
                    describe(v) + ".");
  }
  if (mode != "full" && mode != "same" && mode != "valid") {
    invalid(op, "mode must be 'full', 'same' or 'valid', got '" + mode + "'.");
  }
  if (a.size() == 0 || v.size() == 0) {
    invalid(op, "inputs must not be empty, got " + describe(a) + " and " +
                    describe(v) + ".");
  }
  bool swap = v.size() > a.size();
  const array& sig = swap ? v : a;
  const array& ker = swap ? a : v;
  int n = sig.shape(0), k = ker.shape(0);
  Dtype dt = promote_types(a.dtype(), v.dtype());
  // conv1d cross-correlates, so the kernel is flipped.
  auto flipped =
      slice(astype(ker, dt, s), Shape{k - 1}, Shape{-k - 1}, Shape{-1}, s);
  auto x = reshape(astype(sig, dt, s), {1, n, 1}, s);
  auto w = reshape(flipped, {1, k, 1}, s);
  if (mode == "valid") return reshape(conv1d(x, w, 1, 0, 1, 1, s), {-1}, s);
  auto full_out = reshape(conv1d(x, w, 1, k - 1, 1, 1, s), {-1}, s);
  if (mode == "full") return full_out;
  int lo = (k - 1) / 2;
  return slice(full_out, Shape{lo}, Shape{lo + n}, s);
}

namespace {

// The Hadamard matrix of order 12 from Paley's construction II for q = 5:
// the Jacobsthal matrix Q of GF(5) bordered by ones into C, then each 0 of
// C replaced by [[1, -1], [-1, -1]] and each +-1 by +-[[1, 1], [1, -1]].
std::vector<float> paley_12() {
  auto chi = [](int a) { // quadratic character of GF(5): squares are 1, 4
    a = ((a % 5) + 5) % 5;
    return a == 0 ? 0 : (a == 1 || a == 4 ? 1 : -1);
  };
  std::vector<float> h(144);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      int c = i == 0 || j == 0 ? (i != j) : chi(j - i);
      for (int r = 0; r < 2; ++r) {
        for (int t = 0; t < 2; ++t) {
          int v = c == 0 ? (r == 0 && t == 0 ? 1 : -1)
                         : c * (r == 1 && t == 1 ? -1 : 1);
          h[(2 * i + r) * 12 + 2 * j + t] = static_cast<float>(v);
        }
      }
    }
  }
  return h;
}

// Williamson's array [[A, B, C, D], [-B, A, -D, C], [-C, D, A, -B],
// [-D, -C, B, A]] of symmetric circulant blocks, each given by its first
// row as a string of signs.
std::vector<float> williamson(const std::array<const char*, 4>& rows) {
  int w = static_cast<int>(std::string(rows[0]).size()), n = 4 * w;
  // Block (bi, bj) is sign * circ(rows[which]).
  const int which[4][4] = {
      {0, 1, 2, 3}, {1, 0, 3, 2}, {2, 3, 0, 1}, {3, 2, 1, 0}};
  const int sign[4][4] = {
      {1, 1, 1, 1}, {-1, 1, -1, 1}, {-1, 1, 1, -1}, {-1, -1, 1, 1}};
  std::vector<float> h(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int bi = i / w, bj = j / w;
      char c = rows[which[bi][bj]][((j % w) - (i % w) + w) % w];
      h[i * n + j] = static_cast<float>(sign[bi][bj] * (c == '+' ? 1 : -1));
    }
  }
  return h;
}

// The Hadamard matrix of order m (12, 20 or 28) that MLX uses, so results
// agree: Paley's for 12 and Williamson arrays for 20 and 28.
array hadamard_base(int m, Dtype dt) {
  std::vector<float> h =
      m == 12   ? paley_12()
      : m == 20 ? williamson({"+----", "+----", "++--+", "+-++-"})
                : williamson({"+------", "++----+", "+-+--+-", "+--++--"});
  return array(h.begin(), {m, m}, dt);
}

} // namespace

array hadamard_transform(const array& a, std::optional<float> scale,
                         StreamOrDevice s) {
  const char* op = "hadamard_transform";
  if (is_complex(a.dtype())) {
    invalid(op, "complex inputs are not supported, got " + describe(a) + ".");
  }
  Dtype out_dt = detail::at_least_float(a.dtype());
  Dtype dt = out_dt == float64 ? float64 : float32;
  auto x = astype(a.ndim() == 0 ? reshape(a, {1}, s) : a, dt, s);
  int n = x.shape(-1);
  // n = m * 2^k with m = 1, 12, 20 or 28: m follows from n's odd part.
  int odd = n < 1 ? 0 : n >> std::countr_zero(static_cast<unsigned>(n));
  int m = odd == 1 ? 1 : 4 * odd;
  if (n < 1 || (odd != 1 && odd != 3 && odd != 5 && odd != 7) || n % m != 0) {
    invalid(op,
            "the last axis must have size m * 2^k for m in (1, 12, 20, 28), "
            "got " +
                describe(a) + ".");
  }
  int p = n / m;
  Shape shape = x.shape();
  int rows = static_cast<int>(x.size() / n);
  // H_n = H_m (x) H_p. Sylvester's H_2j = [[H_j, H_j], [H_j, -H_j]] is one
  // butterfly per bit of the index within p, each pairing entries `half`
  // apart.
  for (int half = 1; half < p; half *= 2) {
    auto y = reshape(x, {rows * m, p / (2 * half), 2, half}, s);
    auto lo = slice(y, {0, 0, 0, 0}, {y.shape(0), y.shape(1), 1, half}, s);
    auto hi = slice(y, {0, 0, 1, 0}, {y.shape(0), y.shape(1), 2, half}, s);
    x = concatenate({add(lo, hi, s), subtract(lo, hi, s)}, 2, s);
  }
  if (m > 1) x = matmul(hadamard_base(m, dt), reshape(x, {rows, m, p}, s), s);
  float sc = scale.value_or(1.0f / std::sqrt(static_cast<float>(n)));
  x = multiply(reshape(x, shape, s), array(sc, dt), s);
  if (a.ndim() == 0) x = reshape(x, {}, s);
  return astype(x, out_dt, s);
}

} // namespace kiln
