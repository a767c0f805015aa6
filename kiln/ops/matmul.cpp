// matmul, addmm and the contractions built on them.
#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/gather_batches.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/linalg.h"
#include "kiln/primitives/shape.h"

namespace kiln {

using detail::describe;
using detail::invalid;
using detail::shape_str;

namespace {

// Operands of a matrix product, promoted to 2+ dims with batch dims
// broadcast, plus the final output shape (1-d operands' axes removed).
struct Product {
  array a, b;
  Shape out_shape;
  bool a_vec = false, b_vec = false;
  bool folded = false; // a's batch axes folded into its rows
};

// a and b as matrices for op's product: a 1-d a gains a leading 1 and a
// 1-d b a trailing 1 (which of them were vectors is returned); raises when
// either is 0-d or the inner dimensions differ.
std::pair<bool, bool> as_matrices(const char* op, array& a, array& b,
                                  StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    invalid(op, "inputs must have at least one dimension, got " + describe(a) +
                    " and " + describe(b) + ".");
  }
  bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) a = expand_dims(a, 0, s);
  if (b_vec) b = expand_dims(b, -1, s);
  if (a.shape(-1) != b.shape(-2)) {
    invalid(op, "the last dimension of a (" + describe(a) +
                    ") must match the second to last dimension of b (" +
                    describe(b) + ").");
  }
  return {a_vec, b_vec};
}

Product prepare_product(const char* op, array a, array b, Dtype dt,
                        StreamOrDevice s) {
  auto [a_vec, b_vec] = as_matrices(op, a, b, s);
  Shape ab(a.shape().begin(), a.shape().end() - 2);
  Shape bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = detail::broadcast_shapes(ab, bb, op);
  bool shapeless = detail::in_shapeless_tracing();
  // Under shapeless compile the folded rows could not be unfolded again:
  // one -1 follows one changing axis, and a's batch axes may all change.
  if (bb.empty() && !ab.empty() && !shapeless) {
    // b is one matrix for every batch of a: a's batch folds into its rows,
    // one GEMM instead of a batch of them (as MLX does). The gradient with
    // respect to b is then one GEMM over all rows, not a batch of products
    // summed afterwards.
    int64_t rows = a.shape(-2);
    for (int d : ab) rows *= d;
    if (rows <= std::numeric_limits<int32_t>::max()) {
      Shape out = ab;
      if (!a_vec) out.push_back(a.shape(-2));
      if (!b_vec) out.push_back(b.shape(-1));
      a = reshape(astype(a, dt, s), {static_cast<int32_t>(rows), a.shape(-1)},
                  s);
      return {a, astype(b, dt, s), out, a_vec, b_vec, true};
    }
  }
  Shape a_shape = batch, b_shape = batch;
  a_shape.insert(a_shape.end(), {a.shape(-2), a.shape(-1)});
  b_shape.insert(b_shape.end(), {b.shape(-2), b.shape(-1)});
  Shape out = batch;
  if (!a_vec) out.push_back(a.shape(-2));
  if (!b_vec) out.push_back(b.shape(-1));
  a = astype(a, dt, s);
  b = astype(b, dt, s);
  if (shapeless && !batch.empty()) {
    // Batch axes that follow both operands when a new shape replays.
    auto st = to_stream(s);
    array a_b(a_shape, dt, std::make_shared<BroadcastLike>(st, 2), {a, b});
    array b_b(b_shape, dt, std::make_shared<BroadcastLike>(st, 2), {b, a});
    return {a_b, b_b, out, a_vec, b_vec};
  }
  return {broadcast_to(a, a_shape, s), broadcast_to(b, b_shape, s), out,
          a_vec, b_vec};
}

// The product's output with p's final shape: the folded rows unfolded, or
// the axes a vector operand gained removed (a squeeze, which follows new
// shapes under shapeless compile, where nothing is folded).
array final_shape(const array& out, const Product& p, StreamOrDevice s) {
  if (out.shape() == p.out_shape && !p.a_vec && !p.b_vec) return out;
  if (p.folded) return reshape(out, p.out_shape, s);
  std::vector<int> axes;
  if (p.a_vec) axes.push_back(static_cast<int>(out.ndim()) - 2);
  if (p.b_vec) axes.push_back(static_cast<int>(out.ndim()) - 1);
  return squeeze(out, axes, s);
}

Shape full_shape(const Product& p) {
  Shape s = p.a.shape();
  s.back() = p.b.shape(-1);
  return s;
}

} // namespace

array matmul(const array& a, const array& b, StreamOrDevice s) {
  Dtype dt = promote_types(a.dtype(), b.dtype());
  if (!is_inexact(dt)) {
    invalid("matmul", "only inexact types are supported, but " + describe(a) +
                          " and " + describe(b) + " promote to " +
                          dtype_name(dt) + ".");
  }
  auto p = prepare_product("matmul", a, b, dt, s);
  array out(full_shape(p), dt, std::make_shared<Matmul>(to_stream(s)),
            {p.a, p.b});
  return final_shape(out, p, s);
}

array addmm(array c, array a, array b, float alpha, float beta,
            StreamOrDevice s) {
  Dtype dt = promote_types(c.dtype(), promote_types(a.dtype(), b.dtype()));
  if (!is_inexact(dt)) {
    invalid("addmm", "only inexact types are supported, but " +
                         describe(c) + ", " + describe(a) + " and " +
                         describe(b) + " promote to " + dtype_name(dt) + ".");
  }
  auto p = prepare_product("addmm", a, b, dt, s);
  Shape full = full_shape(p);
  // c must broadcast to the product's final shape (as MLX requires).
  if (c.ndim() > p.out_shape.size() ||
      detail::broadcast_shapes(c.shape(), p.out_shape, "addmm") !=
          p.out_shape) {
    invalid("addmm", "c (" + describe(c) +
                         ") must broadcast to the output shape " +
                         shape_str(p.out_shape) + ".");
  }
  c = astype(c, dt, s);
  int n = full.back();
  bool vector_bias =
      c.ndim() >= 1 && c.shape(-1) == n && static_cast<int64_t>(c.size()) == n;
  if (vector_bias) {
    // Keep the bias a vector over the last axis (see AddMM's header).
    if (c.ndim() != 1) c = reshape(c, {n}, s);
  } else {
    c = reshape(broadcast_to(c, p.out_shape, s), full, s);
  }
  array out(full, dt, std::make_shared<AddMM>(to_stream(s), alpha, beta),
            {c, p.a, p.b});
  return final_shape(out, p, s);
}

namespace {

// The real floating dtype a and b promote to, which op requires.
Dtype real_floating_type(const char* op, const array& a, const array& b) {
  Dtype dt = promote_types(a.dtype(), b.dtype());
  if (!is_floating_point(dt)) {
    invalid(op, "only real floating types are supported, but " + describe(a) +
                    " and " + describe(b) + " promote to " + dtype_name(dt) +
                    ".");
  }
  return dt;
}

} // namespace

namespace detail {

array batch_indices(const std::optional<array>& idx, const array& x,
                    const char* op, const char* name,
                    const std::string& operands, StreamOrDevice s) {
  Shape batch(x.shape().begin(), x.shape().end() - 2);
  if (!idx) {
    int64_t n = 1;
    for (int d : batch) n *= d;
    return reshape(arange(0.0, static_cast<double>(n), uint32, s), batch, s);
  }
  if (!is_integral(idx->dtype())) {
    invalid(op, std::string(name) + " must be integers, got " +
                    describe(*idx) + " for " + operands + ".");
  }
  return astype(*idx, uint32, s);
}

array flat_batch(const array& x, StreamOrDevice s) {
  if (x.ndim() == 3) return x;
  int32_t n = -1;
  if (x.shape(-2) == 0 || x.shape(-1) == 0) {
    // Empty matrices leave -1 nothing to infer from.
    n = 1;
    for (size_t i = 0; i + 2 < x.ndim(); ++i) n *= x.shape()[i];
  }
  return reshape(x, {n, x.shape(-2), x.shape(-1)}, s);
}

} // namespace detail

array gather_mm(array a, array b, std::optional<array> lhs_indices,
                std::optional<array> rhs_indices, bool sorted_indices,
                StreamOrDevice s) {
  if (!lhs_indices && !rhs_indices) return matmul(a, b, s);
  const char* op = "gather_mm";
  Dtype dt = real_floating_type(op, a, b);
  auto [a_vec, b_vec] = as_matrices(op, a, b, s);
  std::string operands = "a " + describe(a) + " and b " + describe(b);
  array li = detail::batch_indices(lhs_indices, a, op, "lhs_indices",
                                   operands, s);
  array ri = detail::batch_indices(rhs_indices, b, op, "rhs_indices",
                                   operands, s);
  Shape batch = detail::broadcast_shapes(li.shape(), ri.shape(), op);
  li = broadcast_to(li, batch, s);
  ri = broadcast_to(ri, batch, s);
  a = detail::flat_batch(astype(a, dt, s), s);
  b = detail::flat_batch(astype(b, dt, s), s);
  if (li.size() > 0 && (a.shape(0) == 0 || b.shape(0) == 0)) {
    invalid(op, "indices pick from an empty batch: a " + describe(a) +
                    " and b " + describe(b) + ".");
  }
  Shape full = batch;
  full.insert(full.end(), {a.shape(-2), b.shape(-1)});
  array out(full, dt, std::make_shared<GatherMM>(to_stream(s), sorted_indices),
            {a, b, li, ri});
  if (a_vec) out = squeeze(out, {-2}, s);
  if (b_vec) out = squeeze(out, {-1}, s);
  return out;
}

array segmented_mm(array a, array b, const array& segments,
                   StreamOrDevice s) {
  const char* op = "segmented_mm";
  Dtype dt = real_floating_type(op, a, b);
  if (a.ndim() != 2 || b.ndim() != 2 || a.shape(1) != b.shape(0)) {
    invalid(op, "needs (M, K) and (K, N) operands, got " + describe(a) +
                    " and " + describe(b) + ".");
  }
  if (segments.ndim() < 1 || segments.shape(-1) != 2 ||
      !is_integral(segments.dtype())) {
    invalid(op, "segments must be integers of shape (..., 2), got " +
                    describe(segments) + ".");
  }
  Shape batch(segments.shape().begin(), segments.shape().end() - 1);
  int64_t n = static_cast<int64_t>(segments.size() / 2);
  array seg = reshape(astype(segments, uint32, s),
                      {static_cast<int32_t>(n), 2}, s);
  array out({static_cast<int32_t>(n), a.shape(0), b.shape(1)}, dt,
            std::make_shared<SegmentedMM>(to_stream(s)),
            {astype(a, dt, s), astype(b, dt, s), seg});
  Shape full = batch;
  full.insert(full.end(), {a.shape(0), b.shape(1)});
  return reshape(out, full, s);
}

array inner(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b, s);
  if (a.shape(-1) != b.shape(-1)) {
    invalid("inner", "the last dimensions of " + describe(a) + " and " +
                         describe(b) + " must match.");
  }
  return tensordot(a, b, {-1}, {-1}, s);
}

array outer(const array& a, const array& b, StreamOrDevice s) {
  return multiply(reshape(a, {-1, 1}, s), reshape(b, {-1}, s), s);
}

array tensordot(const array& a, const array& b, int axis, StreamOrDevice s) {
  if (axis < 0) {
    invalid("tensordot",
            "axis must be non-negative, got " + std::to_string(axis) + ".");
  }
  if (axis > static_cast<int>(a.ndim()) || axis > static_cast<int>(b.ndim())) {
    invalid("tensordot", "cannot contract " + std::to_string(axis) +
                             " axes of " + describe(a) + " and " + describe(b) +
                             ".");
  }
  std::vector<int> axes_a(axis), axes_b(axis);
  std::iota(axes_a.begin(), axes_a.end(), static_cast<int>(a.ndim()) - axis);
  std::iota(axes_b.begin(), axes_b.end(), 0);
  return tensordot(a, b, axes_a, axes_b, s);
}

array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s) {
  const char* op = "tensordot";
  if (axes_a.size() != axes_b.size()) {
    invalid(op, "axes_a and axes_b must have the same length.");
  }
  int na = static_cast<int>(a.ndim()), nb = static_cast<int>(b.ndim());
  std::vector<int> ca, cb;
  for (size_t i = 0; i < axes_a.size(); ++i) {
    ca.push_back(detail::normalize_axis(axes_a[i], na, op));
    cb.push_back(detail::normalize_axis(axes_b[i], nb, op));
    if (a.shape(ca.back()) != b.shape(cb.back())) {
      invalid(op, "contracted axes must have equal sizes, got " + describe(a) +
                      " and " + describe(b) + ".");
    }
  }
  // Normalizing the sorted copies checks for duplicates.
  detail::normalize_axes(ca, na, op);
  detail::normalize_axes(cb, nb, op);
  auto free_axes = [](int n, const std::vector<int>& used) {
    std::vector<int> f;
    for (int i = 0; i < n; ++i) {
      if (std::find(used.begin(), used.end(), i) == used.end()) f.push_back(i);
    }
    return f;
  };
  auto fa = free_axes(na, ca), fb = free_axes(nb, cb);
  Shape out_shape;
  int64_t m = 1, n = 1, k = 1;
  for (int i : fa) m *= a.shape(i), out_shape.push_back(a.shape(i));
  for (int i : fb) n *= b.shape(i), out_shape.push_back(b.shape(i));
  for (int i : ca) k *= a.shape(i);
  std::vector<int> pa = fa, pb = cb;
  pa.insert(pa.end(), ca.begin(), ca.end());
  pb.insert(pb.end(), fb.begin(), fb.end());
  auto am = reshape(transpose(a, pa, s),
                    {static_cast<int>(m), static_cast<int>(k)}, s);
  auto bm = reshape(transpose(b, pb, s),
                    {static_cast<int>(k), static_cast<int>(n)}, s);
  return reshape(matmul(am, bm, s), out_shape, s);
}

} // namespace kiln
