// searchsorted and unique (declared in sort.h). unique builds on a stable
// argsort: the first element of each run of equal sorted values starts a
// new unique value, and scatters place values, counts and indices.
// complex64 values search as integer keys in MLX's order of them
// (complex_order.h).
#include "kiln/ops/complex_order.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/sort.h"

namespace kiln {

using detail::describe;
using detail::invalid;

array searchsorted(const array& sorted_sequence, const array& values,
                   const std::string& side, StreamOrDevice s) {
  if (side != "left" && side != "right") {
    invalid("searchsorted",
            "side must be 'left' or 'right', got '" + side + "'.");
  }
  if (sorted_sequence.ndim() != 1) {
    invalid("searchsorted", "the sorted sequence must be 1-d, got a " +
                                describe(sorted_sequence) + ".");
  }
  Dtype dt = promote_types(sorted_sequence.dtype(), values.dtype());
  array seq = astype(sorted_sequence, dt, s), vals = astype(values, dt, s);
  if (is_complex(dt)) {
    seq = detail::complex_order_keys(seq, s);
    vals = detail::complex_order_keys(vals, s);
  }
  auto p = std::make_shared<SearchSorted>(to_stream(s), side == "right");
  return array(values.shape(), uint32, std::move(p), {seq, vals});
}

std::vector<array> unique(const array& a, int size, bool return_index,
                          bool return_inverse, bool return_counts,
                          const std::optional<array>& fill_value,
                          StreamOrDevice s) {
  if (size < 0) {
    invalid("unique",
            "size must be non-negative, got " + std::to_string(size) + ".");
  }
  int n = static_cast<int>(a.size());
  if (n == 0 && size > 0 && !fill_value) {
    invalid("unique", "an empty input needs a fill_value to pad to size " +
                          std::to_string(size) + ".");
  }
  if (size == 0) {
    // Nothing to place (a scatter into no slots has no slice to write);
    // the inverse has nowhere to point and is zero, as MLX.
    std::vector<array> out{zeros({0}, a.dtype(), s)};
    if (return_index) out.push_back(zeros({0}, uint32, s));
    if (return_inverse) out.push_back(zeros(a.shape(), uint32, s));
    if (return_counts) out.push_back(zeros({0}, int32, s));
    return out;
  }
  auto flat = reshape(a, {n}, s);
  auto perm = argsort(flat, 0, s);
  auto sorted = take(flat, perm, 0, s);
  // Rank of each sorted element among the unique values (NaN != NaN, so
  // each NaN is its own value, as MLX).
  auto is_first =
      n == 0 ? zeros({0}, bool_, s)
             : concatenate({full({1}, true, s),
                            not_equal(slice(sorted, {1}, {n}, s),
                                      slice(sorted, {0}, {n - 1}, s), s)},
                           0, s);
  auto rank = subtract(cumsum(astype(is_first, int32, s), 0, false, true, s),
                       array(1, int32), s);
  // Scatters drop indices past size, which truncates the output.
  auto column = [&](const array& x) { return reshape(x, {n, 1}, s); };
  auto fill = fill_value
                  ? astype(*fill_value, a.dtype(), s)
                  : (n > 0 ? take(sorted, 0, 0, s) : zeros({}, a.dtype(), s));
  if (fill.ndim() != 0) {
    invalid("unique",
            "fill_value must be a scalar, got a " + describe(fill) + ".");
  }
  std::vector<array> out;
  out.push_back(scatter(full({size}, fill, s), rank, column(sorted), 0, s));
  if (return_index) {
    // Only the first of each run writes (the rest aim past the end); the
    // stable sort makes it the earliest occurrence. Padding repeats the
    // first entry's index, as MLX.
    auto first_pos = n > 0 ? take(perm, 0, 0, s) : zeros({}, uint32, s);
    auto target = where(is_first, rank, array(size, int32), s);
    out.push_back(
        scatter(full({size}, first_pos, s), target, column(perm), 0, s));
  }
  if (return_inverse) {
    // Truncated values point at the last entry kept.
    auto clamped =
        maximum(minimum(rank, array(size - 1, int32), s), array(0, int32), s);
    auto inv = scatter(zeros({n}, uint32, s), perm,
                       column(astype(clamped, uint32, s)), 0, s);
    out.push_back(reshape(inv, a.shape(), s));
  }
  if (return_counts) {
    out.push_back(scatter_add(zeros({size}, int32, s), rank,
                              column(ones({n}, int32, s)), 0, s));
  }
  return out;
}

} // namespace kiln
