// Transformation rules of reductions, arg-reductions and scans.
#include <limits>
#include <numeric>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/batching.h"
#include "kiln/primitives/reduction.h"

namespace kiln {

using detail::batch_first;

namespace {

std::vector<int> shifted(const std::vector<int>& axes) {
  std::vector<int> out;
  for (int a : axes) out.push_back(a + 1);
  return out;
}

// prod over axes of everything except each element: the product of the
// exclusive scans from both ends over the reduced axes moved last and
// flattened. Exact where x has zeros (no division).
array product_of_others(const array& x, const std::vector<int>& axes) {
  int nd = static_cast<int>(x.ndim());
  std::vector<int> perm;
  for (int i = 0; i < nd; ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) perm.push_back(i);
  }
  size_t kept = perm.size();
  perm.insert(perm.end(), axes.begin(), axes.end());
  auto xt = transpose(x, perm);
  Shape flat(xt.shape().begin(), xt.shape().begin() + kept);
  flat.push_back(-1);
  auto xf = reshape(xt, flat);
  int last = static_cast<int>(kept);
  auto g =
      multiply(cumprod(xf, last, false, false), cumprod(xf, last, true, false));
  g = reshape(g, xt.shape());
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int>(i);
  return transpose(g, inverse);
}

} // namespace

std::vector<array> Reduce::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>&,
                               const std::vector<array>& outputs) {
  const array& x = primals[0];
  auto cot = detail::broadcast_like(cotangents[0], x);
  switch (type_) {
    case Sum:
      return {cot};
    case Prod:
      // Conjugated for complex x, as every holomorphic op's (see
      // Elementwise::vjp).
      return {multiply(cot, conjugate(product_of_others(x, axes_)))};
    case Max:
    case Min: {
      // Ties share the gradient equally.
      auto mask = astype(equal(x, outputs[0]), x.dtype());
      auto count = sum(mask, axes_, true);
      return {multiply(cot, divide(mask, count))};
    }
    default:
      return {zeros_like(x)};
  }
}

std::vector<array> Reduce::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>&) {
  const array& x = primals[0];
  const array& t = tangents[0];
  switch (type_) {
    case Sum:
      return {sum(t, axes_, true)};
    case Prod:
      return {sum(multiply(t, product_of_others(x, axes_)), axes_, true)};
    case Max:
    case Min: {
      auto out = type_ == Max ? max(x, axes_, true) : min(x, axes_, true);
      auto mask = astype(equal(x, out), x.dtype());
      return {
          divide(sum(multiply(t, mask), axes_, true), sum(mask, axes_, true))};
    }
    default:
      return {zeros(output_shapes(primals)[0], bool_)};
  }
}

std::pair<std::vector<array>, std::vector<int>> Reduce::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = batch_first(inputs[0], axes[0]);
  auto ax = shifted(axes_);
  switch (type_) {
    case Sum: return {{sum(x, ax, true)}, {0}};
    case Prod: return {{prod(x, ax, true)}, {0}};
    case Max: return {{max(x, ax, true)}, {0}};
    case Min: return {{min(x, ax, true)}, {0}};
    case And: return {{all(x, ax, true)}, {0}};
    default: return {{any(x, ax, true)}, {0}};
  }
}

std::vector<array> ArgReduce::vjp(const std::vector<array>& primals,
                                  const std::vector<array>&,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  return {zeros_like(primals[0])};
}

std::vector<array> ArgReduce::jvp(const std::vector<array>& primals,
                                  const std::vector<array>&,
                                  const std::vector<int>&) {
  return {zeros(output_shapes(primals)[0], uint32)};
}

std::pair<std::vector<array>, std::vector<int>> ArgReduce::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = batch_first(inputs[0], axes[0]);
  auto out =
      type_ == ArgMax ? argmax(x, axis_ + 1, true) : argmin(x, axis_ + 1, true);
  return {{out}, {0}};
}

namespace {
// exp(shift) times the scan (direction `reverse`) of w_k exp(v_k), summed
// in log space with the shift added before exp, so that neither factor
// overflows alone; positive and negative weights are scanned apart.
array weighted_exp_scan(const array& w, const array& v, const array& shift,
                        int axis, bool reverse, bool inclusive) {
  auto zero = zeros_like(w);
  auto part = [&](const array& wpart) {
    // log of the weights, -inf where they are 0, with a finite derivative
    // everywhere (so that second derivatives are not NaN).
    auto positive = greater(wpart, zero);
    auto logw =
        where(positive, log(where(positive, wpart, ones_like(wpart))),
              array(-std::numeric_limits<double>::infinity(), w.dtype()));
    auto lse = logcumsumexp(add(logw, v), axis, reverse, inclusive);
    return exp(add(lse, shift));
  };
  return subtract(part(maximum(w, zero)), part(maximum(negative(w), zero)));
}
// cumprod's rules for zeros in x. Along a line with its first zero at z:
// output i < z is a product of nonzeros (y_i / x_j is its derivative); for
// i >= z only x_z's derivative can be nonzero: the product of the others,
// the cumprod y1 of the line with x_z set to 1 (0 again past a second
// zero). Written for the forward inclusive scan; a reversed scan is the
// forward one of the flipped line, an exclusive one the inclusive scan of
// the line shifted one place right behind a 1.
struct ZeroSplit {
  ZeroSplit(const array& x, int axis) {
    auto zero = equal(x, zeros_like(x));
    auto count = cumsum(astype(zero, int32), axis, false, true);
    before = equal(count, array(0));
    first = logical_and(zero, equal(count, array(1)));
    nonzero = where(before, x, ones_like(x));
    y = cumprod(nonzero, axis, false, true);
    y1 = cumprod(where(first, ones_like(x), x), axis, false, true);
  }
  array before{0}, first{0}, nonzero{0}, y{0}, y1{0};
};

array slice_axis(const array& x, int axis, int start, int stop) {
  Shape lo(x.ndim(), 0);
  Shape hi = x.shape();
  lo[axis] = start;
  hi[axis] = stop;
  return slice(x, lo, hi);
}

// x_{i - 1} at i, `fill` first.
array shift_right(const array& x, int axis, double fill) {
  Shape one = x.shape();
  one[axis] = 1;
  return concatenate({full(one, array(fill, x.dtype())),
                      slice_axis(x, axis, 0, x.shape(axis) - 1)},
                     axis);
}

// g_{j + 1} at j, 0 last.
array shift_left(const array& g, int axis) {
  Shape one = g.shape();
  one[axis] = 1;
  return concatenate(
      {slice_axis(g, axis, 1, g.shape(axis)), zeros(one, g.dtype())}, axis);
}

array cumprod_vjp(const array& x, const array& c, int axis, bool reverse,
                  bool inclusive) {
  if (x.shape(axis) == 0) return zeros_like(x);
  if (reverse) {
    return flip(cumprod_vjp(flip(x, axis), flip(c, axis), axis, false,
                            inclusive),
                axis);
  }
  if (!inclusive) {
    return shift_left(
        cumprod_vjp(shift_right(x, axis, 1), c, axis, false, true), axis);
  }
  ZeroSplit z(x, axis);
  auto early = divide(cumsum(where(z.before, multiply(c, conjugate(z.y)),
                                   zeros_like(c)),
                             axis, true, true),
                      conjugate(z.nonzero));
  auto at_zero = cumsum(multiply(c, conjugate(z.y1)), axis, true, true);
  return where(z.before, early, where(z.first, at_zero, zeros_like(at_zero)));
}

array cumprod_jvp(const array& x, const array& t, int axis, bool reverse,
                  bool inclusive) {
  if (x.shape(axis) == 0) return zeros_like(x);
  if (reverse) {
    return flip(cumprod_jvp(flip(x, axis), flip(t, axis), axis, false,
                            inclusive),
                axis);
  }
  if (!inclusive) {
    return cumprod_jvp(shift_right(x, axis, 1), shift_right(t, axis, 0), axis,
                       false, true);
  }
  ZeroSplit z(x, axis);
  auto early = multiply(
      z.y, cumsum(where(z.before, divide(t, z.nonzero), zeros_like(t)), axis,
                  false, true));
  auto t_zero = sum(where(z.first, t, zeros_like(t)), {axis}, true);
  return where(z.before, early, multiply(z.y1, t_zero));
}

} // namespace

std::vector<array> Scan::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>&,
                             const std::vector<array>& outputs) {
  const array& x = primals[0];
  const array& c = cotangents[0];
  switch (type_) {
    case Sum:
      // Each input feeds every later (earlier, when reversed) output.
      return {cumsum(c, axis_, !reverse_, inclusive_)};
    case Prod:
      return {cumprod_vjp(x, c, axis_, reverse_, inclusive_)};
    case LogAddExp: {
      // d y_i / d x_j = exp(x_j - y_i) for the j that y_i includes, summed
      // over the outputs in the other direction, in log space.
      // Outputs that sum nothing (-inf) pass no gradient back.
      const array& y = outputs[0];
      auto empty = isneginf(y);
      auto c_used = where(empty, zeros_like(c), c);
      auto v = where(empty, zeros_like(y), negative(y));
      return {weighted_exp_scan(c_used, v, x, axis_, !reverse_, inclusive_)};
    }
    default: {
      // cummax / cummin: the inclusive y_i comes from the latest position
      // j <= i (in scan order) where x equals its own running extreme; c_i
      // is added there. An exclusive output is the inclusive one of its
      // predecessor, so its cotangent moves one step back first.
      int n = x.shape(axis_);
      if (n == 0) return {zeros_like(x)};
      auto y = inclusive_ ? outputs[0]
                          : (type_ == Max ? cummax(x, axis_, reverse_, true)
                                          : cummin(x, axis_, reverse_, true));
      auto c_inc = c;
      if (!inclusive_) {
        Shape zshape = c.shape();
        zshape[axis_] = 1;
        auto z = zeros(zshape, c.dtype());
        Shape start(x.ndim(), 0), stop = c.shape();
        if (reverse_) {
          stop[axis_] = n - 1;
          c_inc = concatenate({z, slice(c, start, stop)}, axis_);
        } else {
          start[axis_] = 1;
          c_inc = concatenate({slice(c, start, stop), z}, axis_);
        }
      }
      Shape ishape(x.ndim(), 1);
      ishape[axis_] = n;
      auto idx = reshape(arange(0, n, 1), ishape);
      if (reverse_) idx = subtract(array(n - 1), idx);
      auto src = cummax(where(equal(x, y), idx, array(-1)), axis_, reverse_,
                        true);
      // A NaN never equals its running extreme; it owns nothing.
      auto owned = greater_equal(src, array(0));
      c_inc = where(owned, c_inc, zeros_like(c_inc));
      src = where(owned, src, zeros_like(src));
      if (reverse_) src = subtract(array(n - 1), src);
      // The owners are locally constant, so higher derivatives stop here.
      src = stop_gradient(src);
      return {scatter_add_axis(zeros_like(c_inc), src, c_inc, axis_)};
    }
  }
}

std::vector<array> Scan::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>&) {
  const array& x = primals[0];
  const array& t = tangents[0];
  switch (type_) {
    case Sum:
      return {cumsum(t, axis_, reverse_, inclusive_)};
    case Prod:
      return {cumprod_jvp(x, t, axis_, reverse_, inclusive_)};
    case LogAddExp: {
      // dy_i = sum_j t_j exp(x_j - y_i) over the j that y_i includes.
      auto y = logcumsumexp(x, axis_, reverse_, inclusive_);
      auto dy =
          weighted_exp_scan(t, x, negative(y), axis_, reverse_, inclusive_);
      // An empty sum (an exclusive scan's first output, -inf) has tangent 0.
      return {where(isneginf(y), zeros_like(dy), dy)};
    }
    default: {
      // The tangent of the element each output came from.
      auto y = type_ == Max ? cummax(x, axis_, reverse_, inclusive_)
                            : cummin(x, axis_, reverse_, inclusive_);
      int n = x.shape(axis_);
      Shape ishape(x.ndim(), 1);
      ishape[axis_] = n;
      auto idx = reshape(arange(0, n, 1), ishape);
      if (reverse_) idx = subtract(array(n - 1), idx);
      auto src =
          cummax(where(equal(x, y), idx, array(-1)), axis_, reverse_, true);
      auto hit =
          astype(equal(expand_dims(src, axis_ + 1), expand_dims(idx, axis_)),
                 t.dtype());
      return {sum(multiply(expand_dims(t, axis_), hit), axis_ + 1)};
    }
  }
}

std::pair<std::vector<array>, std::vector<int>> Scan::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = batch_first(inputs[0], axes[0]);
  int ax = axis_ + 1;
  switch (type_) {
    case Sum: return {{cumsum(x, ax, reverse_, inclusive_)}, {0}};
    case Prod: return {{cumprod(x, ax, reverse_, inclusive_)}, {0}};
    case Max: return {{cummax(x, ax, reverse_, inclusive_)}, {0}};
    case LogAddExp: return {{logcumsumexp(x, ax, reverse_, inclusive_)}, {0}};
    default: return {{cummin(x, ax, reverse_, inclusive_)}, {0}};
  }
}

// ---- NumberOfElements: depends on the input's shape only ----

std::vector<array> NumberOfElements::vjp(const std::vector<array>& primals,
                                         const std::vector<array>&,
                                         const std::vector<int>&,
                                         const std::vector<array>&) {
  return {zeros_like(primals[0])};
}

std::vector<array> NumberOfElements::jvp(const std::vector<array>&,
                                         const std::vector<array>&,
                                         const std::vector<int>&) {
  return {zeros(Shape{}, dtype_)};
}

std::pair<std::vector<array>, std::vector<int>> NumberOfElements::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // The count of one batch element (the batch axis is not counted), the
  // same for every element of the batch.
  int b = axes[0];
  std::vector<int> shifted;
  for (int a : axes_) shifted.push_back(a >= b ? a + 1 : a);
  auto p = std::make_shared<NumberOfElements>(stream(), std::move(shifted),
                                              ddof_, dtype_);
  array n(Shape{}, dtype_, std::move(p), {inputs[0]});
  return {{broadcast_to(n, {inputs[0].shape(b)})}, {0}};
}

} // namespace kiln
