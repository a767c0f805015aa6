// Transformation rules of the matrix products, the inverse and solve. The
// primitives' operands already share one batch shape (broadcast views), so a
// rule may return cotangents of that shape; the Broadcast nodes in front of
// them reduce over broadcast dimensions.
#include <optional>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/sort.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

using detail::batch_first;
using detail::batch_size;

namespace {

array mT(const array& x, StreamOrDevice s) { return swapaxes(x, -1, -2, s); }

array scaled(const array& x, float f, StreamOrDevice s) {
  return f == 1.0f ? x : multiply(x, array(f, x.dtype()), s);
}

array sum_or_first(const std::optional<array>& acc, const array& x,
                   StreamOrDevice s) {
  return acc ? add(*acc, x, s) : x;
}

// The jvp of a product bilinear in its first two inputs (any others held):
// product(ta, b) + product(a, tb) over those differentiated, zeros of
// `shape` when neither is.
template <typename Product>
array bilinear_jvp(const std::vector<array>& primals,
                   const std::vector<array>& tangents,
                   const std::vector<int>& argnums, Product product,
                   const Shape& shape, StreamOrDevice s) {
  std::optional<array> t;
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] > 1) continue;
    t = sum_or_first(t,
                     argnums[k] == 0 ? product(tangents[k], primals[1])
                                     : product(primals[0], tangents[k]),
                     s);
  }
  return t ? *t : zeros(shape, primals[0].dtype(), s);
}

} // namespace

// ---- Matmul ----
std::vector<array> Matmul::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>&) {
  StreamOrDevice s = stream();
  const array& c = cotangents[0];
  std::vector<array> out;
  // The conjugate transposes for complex operands (MLX's convention; see
  // Elementwise::vjp); conjugate leaves a real array as it is.
  for (int i : argnums) {
    out.push_back(i == 0 ? matmul(c, conjugate(mT(primals[1], s), s), s)
                         : matmul(conjugate(mT(primals[0], s), s), c, s));
  }
  return out;
}

std::vector<array> Matmul::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  StreamOrDevice s = stream();
  auto product = [&](const array& a, const array& b) {
    return matmul(a, b, s);
  };
  return {bilinear_jvp(primals, tangents, argnums, product,
                       output_shapes(primals)[0], s)};
}

std::pair<std::vector<array>, std::vector<int>> Matmul::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // Batch axes go first; an unmapped operand keeps its (equal) batch dims,
  // which align from the right, so matmul broadcasts it over the new axis.
  StreamOrDevice s = stream();
  auto a = batch_first(inputs[0], axes[0], s);
  auto b = batch_first(inputs[1], axes[1], s);
  return {{matmul(a, b, s)}, {0}};
}

// ---- GatherMM: out[i] = a[lhs[i]] @ b[rhs[i]] ----
namespace {

// The picks' cotangent products (P, R, C), summed into the matrices of
// `like` (n, R, C) that idx (P picks) names.
array sum_into(const array& like, const array& idx, const array& products,
               StreamOrDevice s) {
  return scatter_add(zeros_like(like, s), idx, expand_dims(products, 1, s), 0,
                     s);
}

// 0, 1, ... for each of the picks idx (1-d) holds, as uint32: a running
// count, so a shapeless compile replays it at a new number of picks.
array picks_in_order(const array& idx, StreamOrDevice s) {
  array ones = add(multiply(idx, array(0u, uint32), s), array(1u, uint32), s);
  return cumsum(ones, 0, false, false, s);
}

// GatherMM's picks as the gathers read them from n matrices (a negative
// index counts from the end, others clamp): int32, which take() reads so.
array picks_read(const array& idx, int n, StreamOrDevice s) {
  array i = astype(idx, int32, s);
  i = where(less(i, array(0, int32), s), add(i, array(n, int32), s), i, s);
  return clip(i, array(0, int32), array(n - 1, int32), s);
}

// db[e] = the sum over the picks p of matrix e of a_p^T cot_p: the picks
// sorted by matrix, their a and cot rows gathered in that order, and one
// segmented product over each matrix's rows. Memory is the gathered rows
// and db, not a K x N product per pick.
array b_gradient(const array& a, const array& b, const array& lhs,
                 const array& rhs, const array& cot, StreamOrDevice s) {
  int m = a.shape(1), k = a.shape(2), n = b.shape(2), e = b.shape(0);
  array r = picks_read(rhs, e, s);
  array order = argsort(r, s);
  array rows_a = reshape(take(a, take(astype(lhs, int32, s), order, s), 0, s),
                         {-1, k}, s);
  array rows_c = reshape(take(cot, order, 0, s), {-1, n}, s);
  array sorted = take(r, order, s);
  array experts = arange(0, e, 1, s);
  auto bound = [&](const char* side) {
    return multiply(searchsorted(sorted, experts, side, s), array(m, uint32),
                    s);
  };
  array segments = stack({bound("left"), bound("right")}, -1, s);
  return segmented_mm(mT(rows_a, s), rows_c, segments, s);
}

} // namespace

std::vector<array> GatherMM::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>&) {
  StreamOrDevice s = stream();
  const array& a = primals[0];
  const array& b = primals[1];
  // Sizes written as -1 follow the picks under a shapeless compile.
  array lhs = reshape(primals[2], {-1}, s);
  array rhs = reshape(primals[3], {-1}, s);
  array own = picks_in_order(rhs, s);
  array cot = reshape(cotangents[0], {-1, a.shape(1), b.shape(2)}, s);
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // Each pick's cot @ b^T, added to the a matrix it read.
      out.push_back(sum_into(
          a, lhs, gather_mm(cot, mT(b, s), own, rhs, rhs_sorted_, s), s));
    } else if (i == 1) {
      out.push_back(b_gradient(a, b, lhs, rhs, cot, s));
    } else {
      out.push_back(zeros_like(primals[i], s));
    }
  }
  return out;
}

std::vector<array> GatherMM::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  StreamOrDevice s = stream();
  auto product = [&](const array& a, const array& b) {
    return gather_mm(a, b, primals[2], primals[3], rhs_sorted_, s);
  };
  return {bilinear_jvp(primals, tangents, argnums, product,
                       output_shapes(primals)[0], s)};
}

std::pair<std::vector<array>, std::vector<int>> GatherMM::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // A mapped operand's batch (V, n, R, C) becomes a flat batch of V * n
  // matrices, and the indices of map entry v pick from its v-th block of
  // n; unmapped indices gain the map axis. The output keeps it first.
  StreamOrDevice s = stream();
  int v = batch_size(inputs, axes);
  std::vector<array> idx;
  for (int k : {2, 3}) {
    idx.push_back(detail::to_batch_first(inputs[k], axes[k], v));
  }
  std::vector<array> mats;
  for (int k : {0, 1}) {
    const array& x = inputs[k];
    if (axes[k] < 0) {
      mats.push_back(x);
      continue;
    }
    array xb = batch_first(x, axes[k], s);
    int n = xb.shape(1);
    mats.push_back(reshape(xb, {v * n, xb.shape(2), xb.shape(3)}, s));
    Shape offsets(idx[k].ndim(), 1);
    offsets[0] = v;
    array base = reshape(
        multiply(arange(0.0, v, uint32, s), array(n, uint32), s), offsets, s);
    idx[k] = add(idx[k], base, s);
  }
  return {{gather_mm(mats[0], mats[1], idx[0], idx[1], rhs_sorted_, s)}, {0}};
}

// ---- SegmentedMM: out[s] = a[:, seg_s] @ b[seg_s, :] ----
namespace {

// Which of the k columns each segment covers, as 0/1 in dt (S, k), its
// bounds read as SegmentedMM::bounds reads them.
array segment_mask(const array& segments, int k, Dtype dt, StreamOrDevice s) {
  auto bound = [&](int j) {
    array v = astype(take(segments, array(j, int32), 1, s), int32, s);
    return clip(v, array(0, int32), array(k, int32), s);
  };
  array start = expand_dims(bound(0), -1, s);
  array end = expand_dims(bound(1), -1, s);
  array col = reshape(arange(0, k, 1, s), {1, k}, s);
  return astype(
      logical_and(greater_equal(col, start, s), less(col, end, s), s), dt, s);
}

} // namespace

std::vector<array> SegmentedMM::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<array>&) {
  StreamOrDevice s = stream();
  const array& a = primals[0];
  const array& b = primals[1];
  const array& cot = cotangents[0];
  array mask = segment_mask(primals[2], a.shape(1), a.dtype(), s);
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // Each segment's cot_s @ b^T, kept on its columns.
      array g = matmul(cot, mT(b, s), s);
      out.push_back(
          sum(multiply(g, expand_dims(mask, 1, s), s), {0}, false, s));
    } else if (i == 1) {
      array g = matmul(mT(a, s), cot, s);
      out.push_back(
          sum(multiply(g, expand_dims(mask, 2, s), s), {0}, false, s));
    } else {
      out.push_back(zeros_like(primals[i], s));
    }
  }
  return out;
}

std::vector<array> SegmentedMM::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  StreamOrDevice s = stream();
  auto product = [&](const array& a, const array& b) {
    return segmented_mm(a, b, primals[2], s);
  };
  return {bilinear_jvp(primals, tangents, argnums, product,
                       output_shapes(primals)[0], s)};
}

std::pair<std::vector<array>, std::vector<int>> SegmentedMM::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // One product per map entry (a segment's columns differ per entry when
  // a, b or the segments are mapped), stacked.
  StreamOrDevice s = stream();
  int v = batch_size(inputs, axes);
  std::vector<array> outs;
  for (int i = 0; i < v; ++i) {
    std::vector<array> x;
    for (size_t k = 0; k < inputs.size(); ++k) {
      x.push_back(axes[k] >= 0 ? take(inputs[k], i, axes[k], s) : inputs[k]);
    }
    outs.push_back(segmented_mm(x[0], x[1], x[2], s));
  }
  return {{stack(outs, 0, s)}, {0}};
}

// ---- AddMM: out = alpha * (a @ b) + beta * c ----
std::vector<array> AddMM::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums,
                              const std::vector<array>&) {
  StreamOrDevice s = stream();
  const array& c = primals[0];
  const array& cot = cotangents[0];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      auto g = scaled(cot, beta_, s);
      // A vector bias was added to every row: sum over all other axes.
      if (c.shape() != cot.shape()) {
        std::vector<int> rows(cot.ndim() - 1);
        for (size_t k = 0; k < rows.size(); ++k) rows[k] = static_cast<int>(k);
        g = reshape(sum(g, rows, false, s), c.shape(), s);
      }
      out.push_back(g);
    } else if (i == 1) {
      out.push_back(scaled(
          matmul(cot, conjugate(mT(primals[2], s), s), s), alpha_, s));
    } else {
      out.push_back(scaled(
          matmul(conjugate(mT(primals[1], s), s), cot, s), alpha_, s));
    }
  }
  return out;
}

std::vector<array> AddMM::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  StreamOrDevice s = stream();
  Shape shape = output_shapes(primals)[0];
  std::optional<array> prod, bias;
  for (size_t k = 0; k < argnums.size(); ++k) {
    const array& t = tangents[k];
    if (argnums[k] == 0) {
      bias = broadcast_to(scaled(t, beta_, s), shape, s);
    } else {
      auto term =
          argnums[k] == 1 ? matmul(t, primals[2], s) : matmul(primals[1], t, s);
      prod = sum_or_first(prod, term, s);
    }
  }
  if (!prod) return {*bias};
  auto t = scaled(*prod, alpha_, s);
  return {bias ? add(t, *bias, s) : t};
}

std::pair<std::vector<array>, std::vector<int>> AddMM::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  int n = batch_size(inputs, axes);
  auto c = batch_first(inputs[0], axes[0], s);
  auto a = batch_first(inputs[1], axes[1], s);
  auto b = batch_first(inputs[2], axes[2], s);
  // The unbatched product's rank: a's rank without its batch axis.
  int rank = static_cast<int>(inputs[1].ndim()) - (axes[1] >= 0 ? 1 : 0);
  if (axes[0] >= 0) {
    // A mapped vector bias (B, N) becomes (B, 1, ..., 1, N) so that it lines
    // up with the mapped product.
    if (c.ndim() == 2 && rank > 1) {
      Shape shape(rank + 1, 1);
      shape.front() = n;
      shape.back() = c.shape(-1);
      c = reshape(c, shape, s);
    }
    if (axes[1] < 0 && axes[2] < 0) {
      Shape shape = a.shape();
      shape.insert(shape.begin(), n);
      a = broadcast_to(expand_dims(a, 0, s), shape, s);
    }
  }
  return {{addmm(c, a, b, alpha_, beta_, s)}, {0}};
}

// ---- Inverse: d(A^-1) = -A^-1 dA A^-1 ----
std::vector<array> Inverse::vjp(const std::vector<array>&,
                                const std::vector<array>& cotangents,
                                const std::vector<int>&,
                                const std::vector<array>& outputs) {
  StreamOrDevice s = stream();
  auto yt = mT(outputs[0], s);
  return {negative(matmul(yt, matmul(cotangents[0], yt, s), s), s)};
}

std::vector<array> Inverse::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>&) {
  StreamOrDevice s = stream();
  auto y = linalg::inv(primals[0], s);
  return {negative(matmul(y, matmul(tangents[0], y, s), s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Inverse::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  StreamOrDevice s = stream();
  return {{linalg::inv(batch_first(inputs[0], axes[0], s), s)}, {0}};
}

// ---- Solve: x = A^-1 b, so db = A^-T dx and dA = -db x^T ----
std::vector<array> Solve::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums,
                              const std::vector<array>& outputs) {
  StreamOrDevice s = stream();
  auto gb = linalg::solve(mT(primals[0], s), cotangents[0], s);
  std::vector<array> out;
  for (int i : argnums) {
    out.push_back(i == 0 ? negative(matmul(gb, mT(outputs[0], s), s), s) : gb);
  }
  return out;
}

std::vector<array> Solve::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  // dx = A^-1 (db - dA x)
  StreamOrDevice s = stream();
  const array& a = primals[0];
  std::optional<array> rhs;
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == 1) {
      rhs = rhs ? add(*rhs, tangents[k], s) : tangents[k];
    } else {
      auto x = linalg::solve(a, primals[1], s);
      auto term = negative(matmul(tangents[k], x, s), s);
      rhs = rhs ? add(*rhs, term, s) : term;
    }
  }
  return {linalg::solve(a, *rhs, s)};
}

std::pair<std::vector<array>, std::vector<int>> Solve::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // b is at least 2-d here, so solve never takes it for a single vector.
  StreamOrDevice s = stream();
  auto a = batch_first(inputs[0], axes[0], s);
  auto b = batch_first(inputs[1], axes[1], s);
  return {{linalg::solve(a, b, s)}, {0}};
}

} // namespace kiln
