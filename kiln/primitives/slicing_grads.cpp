// Transformation rules of the slicing and joining primitives. A window's
// cotangent is written back into zeros by the matching update primitive
// (same normalized bounds), and an update's cotangent is read back by the
// matching slice.
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/primitives/index_grad_utils.h"
#include "kiln/primitives/slicing.h"

namespace kiln {

using detail::tangent_of;
using detail::to_batch_first;

namespace {

Shape prepend(int v, const Shape& s) {
  Shape out = {v};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

std::vector<int> shifted(const std::vector<int>& axes) {
  std::vector<int> out;
  for (int a : axes) out.push_back(a + 1);
  return out;
}

// The per-axis start columns of a mapped start array (batch axis first):
// one (b,) array per axis.
std::vector<array> start_columns(const array& start, size_t n) {
  if (start.ndim() == 1) return {start};
  std::vector<array> cols;
  for (size_t k = 0; k < n; ++k) {
    cols.push_back(take(start, static_cast<int>(k), 1));
  }
  return cols;
}

} // namespace

// ---- Slice ----
std::vector<array> Slice::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>&,
                              const std::vector<array>&) {
  const array& x = primals[0];
  if (cotangents[0].size() == 0) return {zeros_like(x)};
  auto p = std::make_shared<SliceUpdate>(stream(), start_, stop_, strides_);
  return {array(x.shape(), x.dtype(), std::move(p),
                {zeros_like(x), cotangents[0]})};
}

std::vector<array> Slice::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>&) {
  return {array(output_shapes(primals)[0], tangents[0].dtype(),
                shared_from_this(), {tangents[0]})};
}

std::pair<std::vector<array>, std::vector<int>> Slice::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = to_batch_first(inputs[0], axes[0], 1);
  auto p = std::make_shared<Slice>(stream(), prepend(0, start_),
                                   prepend(slice_end, stop_),
                                   prepend(1, strides_));
  Shape shape = p->output_shapes({x})[0];
  return {{array(shape, x.dtype(), std::move(p), {x})}, {0}};
}

// ---- Split ----
// The pieces usually tile the axis, so the input's cotangent is theirs
// joined; the autograd walk hands zeros for pieces that got none.
// A `like` Split's shape inputs get zeros.
std::vector<array> Split::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums,
                              const std::vector<array>&) {
  std::vector<array> out;
  for (int i : argnums) {
    out.push_back(i == 0 ? input_cotangent(primals, cotangents)
                         : zeros_like(primals[i], stream()));
  }
  return out;
}

array Split::input_cotangent(const std::vector<array>& primals,
                             const std::vector<array>& cotangents) {
  const array& x = primals[0];
  auto pieces = this->pieces(primals);
  bool tiles = true;
  for (size_t k = 0; k < pieces.size(); ++k) {
    int32_t expected = k == 0 ? 0 : pieces[k - 1].second;
    tiles = tiles && pieces[k].first == expected;
  }
  if (tiles && pieces.back().second == x.shape(axis_)) {
    return concatenate(cotangents, axis_, stream());
  }
  // Unsorted indices: pieces overlap or leave gaps, so each cotangent goes
  // back into its own window and overlaps add up.
  array g = zeros_like(x, stream());
  Shape start(x.ndim(), 0), stop = x.shape();
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (cotangents[k].size() == 0) continue;
    start[axis_] = pieces[k].first;
    stop[axis_] = pieces[k].second;
    g = add(g, slice_update(zeros_like(x, stream()), cotangents[k], start, stop,
                            stream()),
            stream());
  }
  return g;
}

std::vector<array> Split::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>&) {
  auto shapes = output_shapes(primals);
  std::vector<Dtype> dtypes(shapes.size(), tangents[0].dtype());
  std::vector<array> in = primals; // a `like` Split's shape inputs stay
  in[0] = tangents[0];
  return array::make_arrays(std::move(shapes), dtypes, shared_from_this(),
                            in);
}

std::pair<std::vector<array>, std::vector<int>> Split::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  std::vector<array> in = {to_batch_first(inputs[0], axes[0], 1)};
  // Shape inputs keep their extent at axis + 1 with a leading axis.
  for (size_t k = 1; k < inputs.size(); ++k) {
    in.push_back(detail::batch_first_or_one(inputs[k], axes[k]));
  }
  auto p = std::make_shared<Split>(stream(), indices_, num_splits_, axis_ + 1,
                                   like_);
  auto shapes = p->output_shapes(in);
  std::vector<Dtype> dtypes(shapes.size(), in[0].dtype());
  auto outs = array::make_arrays(std::move(shapes), dtypes, std::move(p), in);
  return {outs, std::vector<int>(outs.size(), 0)};
}

// ---- DynamicSlice: inputs a, start ----
std::vector<array> DynamicSlice::vjp(const std::vector<array>& primals,
                                     const std::vector<array>& cotangents,
                                     const std::vector<int>& argnums,
                                     const std::vector<array>&) {
  const array& a = primals[0];
  const array& start = primals[1];
  std::vector<array> out;
  for (int i : argnums) {
    if (i != 0 || cotangents[0].size() == 0) {
      out.push_back(zeros_like(primals[i]));
      continue;
    }
    auto p = std::make_shared<DynamicSliceUpdate>(stream(), axes_);
    out.push_back(array(a.shape(), a.dtype(), std::move(p),
                        {zeros_like(a), cotangents[0], start}));
  }
  return out;
}

std::vector<array> DynamicSlice::jvp(const std::vector<array>& primals,
                                     const std::vector<array>& tangents,
                                     const std::vector<int>& argnums) {
  auto t = tangent_of(0, primals, tangents, argnums);
  return {array(slice_size_, t.dtype(), shared_from_this(), {t, primals[1]})};
}

std::pair<std::vector<array>, std::vector<int>> DynamicSlice::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  if (axes[1] < 0) {
    auto a = to_batch_first(inputs[0], axes[0], b);
    auto p = std::make_shared<DynamicSlice>(stream(), shifted(axes_),
                                            prepend(b, slice_size_));
    return {{array(prepend(b, slice_size_), a.dtype(), std::move(p),
                   {a, inputs[1]})},
            {0}};
  }
  // A start per batch element: a gather whose slices start there (gather
  // wraps and clamps starts as the dynamic slice does).
  auto cols =
      start_columns(to_batch_first(inputs[1], axes[1], b), axes_.size());
  if (axes[0] < 0) {
    return {{gather(inputs[0], cols, axes_, slice_size_)}, {0}};
  }
  auto a = to_batch_first(inputs[0], axes[0], b);
  std::vector<array> idx = {detail::batch_index({b})};
  idx.insert(idx.end(), cols.begin(), cols.end());
  std::vector<int> gaxes = {0};
  for (int ax : axes_) gaxes.push_back(ax + 1);
  auto g = gather(a, idx, gaxes, prepend(1, slice_size_));
  return {{squeeze(g, 1)}, {0}};
}

// ---- SliceUpdate: inputs src, update ----
std::vector<array> SliceUpdate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<array>&) {
  const array& cot = cotangents[0];
  const array& upd = primals[1];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // The window was overwritten: no gradient flows to it.
      auto p = std::make_shared<SliceUpdate>(stream(), start_, stop_, strides_);
      out.push_back(array(cot.shape(), cot.dtype(), std::move(p),
                          {cot, zeros_like(upd)}));
    } else {
      auto p = std::make_shared<Slice>(stream(), start_, stop_, strides_);
      out.push_back(array(upd.shape(), cot.dtype(), std::move(p), {cot}));
    }
  }
  return out;
}

std::vector<array> SliceUpdate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  auto ts = tangent_of(0, primals, tangents, argnums);
  auto tu = tangent_of(1, primals, tangents, argnums);
  return {array(ts.shape(), ts.dtype(), shared_from_this(), {ts, tu})};
}

std::pair<std::vector<array>, std::vector<int>> SliceUpdate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  auto src = to_batch_first(inputs[0], axes[0], b);
  auto upd = to_batch_first(inputs[1], axes[1], b);
  auto p = std::make_shared<SliceUpdate>(stream(), prepend(0, start_),
                                         prepend(slice_end, stop_),
                                         prepend(1, strides_));
  return {{array(src.shape(), src.dtype(), std::move(p), {src, upd})}, {0}};
}

// ---- DynamicSliceUpdate: inputs src, update, start ----
std::vector<array> DynamicSliceUpdate::vjp(const std::vector<array>& primals,
                                           const std::vector<array>& cotangents,
                                           const std::vector<int>& argnums,
                                           const std::vector<array>&) {
  const array& cot = cotangents[0];
  const array& upd = primals[1];
  const array& start = primals[2];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(array(cot.shape(), cot.dtype(), shared_from_this(),
                          {cot, zeros_like(upd), start}));
    } else if (i == 1) {
      auto p = std::make_shared<DynamicSlice>(stream(), axes_, upd.shape());
      out.push_back(
          array(upd.shape(), cot.dtype(), std::move(p), {cot, start}));
    } else {
      out.push_back(zeros_like(start));
    }
  }
  return out;
}

std::vector<array> DynamicSliceUpdate::jvp(const std::vector<array>& primals,
                                           const std::vector<array>& tangents,
                                           const std::vector<int>& argnums) {
  auto ts = tangent_of(0, primals, tangents, argnums);
  auto tu = tangent_of(1, primals, tangents, argnums);
  return {
      array(ts.shape(), ts.dtype(), shared_from_this(), {ts, tu, primals[2]})};
}

std::pair<std::vector<array>, std::vector<int>> DynamicSliceUpdate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  auto src = to_batch_first(inputs[0], axes[0], b);
  auto upd = to_batch_first(inputs[1], axes[1], b);
  if (axes[2] < 0) {
    auto p = std::make_shared<DynamicSliceUpdate>(stream(), shifted(axes_));
    return {
        {array(src.shape(), src.dtype(), std::move(p), {src, upd, inputs[2]})},
        {0}};
  }
  // A start per batch element: a scatter of one window per batch row. The
  // scatter drops windows that do not fit, so clamp the starts first.
  auto cols =
      start_columns(to_batch_first(inputs[2], axes[2], b), axes_.size());
  std::vector<array> idx = {detail::batch_index({b})};
  std::vector<int> saxes = {0};
  for (size_t k = 0; k < axes_.size(); ++k) {
    int ax = axes_[k];
    idx.push_back(
        detail::clamped_starts(cols[k], src, ax + 1, upd.shape(ax + 1)));
    saxes.push_back(ax + 1);
  }
  return {{scatter(src, idx, expand_dims(upd, 1), saxes)}, {0}};
}

// ---- Concatenate ----
std::vector<array> Concatenate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<array>&) {
  const array& cot = cotangents[0];
  bool follows = false;
  for (auto& p : primals) follows = follows || detail::shape_follows_replay(p);
  if (follows) {
    // Traced for shapeless compile: one Split like the primals, whose
    // pieces follow their extents along axis on replay.
    std::vector<array> in = {cot};
    in.insert(in.end(), primals.begin(), primals.end());
    auto p = std::make_shared<Split>(stream(), Shape{}, 0, axis_, true);
    auto shapes = p->output_shapes(in);
    std::vector<Dtype> dtypes(shapes.size(), cot.dtype());
    auto pieces = array::make_arrays(std::move(shapes), dtypes, std::move(p),
                                     in);
    std::vector<array> out;
    for (int i : argnums) out.push_back(pieces[i]);
    return out;
  }
  std::vector<int> offsets = {0};
  for (auto& p : primals) offsets.push_back(offsets.back() + p.shape(axis_));
  std::vector<array> out;
  for (int i : argnums) {
    // Slices at fixed offsets: only used outside shapeless tracing.
    Shape start(cot.ndim(), 0), stop(cot.ndim(), slice_end);
    start[axis_] = offsets[i];
    stop[axis_] = offsets[i + 1];
    out.push_back(detail::reshape_like(slice(cot, start, stop), primals[i]));
  }
  return out;
}

std::vector<array> Concatenate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  std::vector<array> ts;
  for (size_t i = 0; i < primals.size(); ++i) {
    ts.push_back(tangent_of(static_cast<int>(i), primals, tangents, argnums));
  }
  return {concatenate(std::move(ts), axis_)};
}

std::pair<std::vector<array>, std::vector<int>> Concatenate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = detail::batch_size(inputs, axes);
  std::vector<array> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    xs.push_back(to_batch_first(inputs[i], axes[i], b));
  }
  return {{concatenate(std::move(xs), axis_ + 1)}, {0}};
}

// ---- AsStrided: the input is row-major ----
std::vector<array> AsStrided::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  const array& x = primals[0];
  const array& cot = cotangents[0];
  if (cot.size() == 0) return {zeros_like(x)};
  // The flat source position of every output element; overlapping windows
  // read an element several times, so their cotangents add up.
  array pos = array(static_cast<int64_t>(offset_));
  for (size_t k = 0; k < shape_.size(); ++k) {
    Shape column(shape_.size(), 1);
    column[k] = shape_[k];
    auto r = astype(arange(0, shape_[k], 1), int64) * strides_[k];
    pos = add(pos, reshape(r, column));
  }
  pos = reshape(broadcast_to(pos, shape_), {-1});
  auto flat = zeros({static_cast<int>(x.size())}, x.dtype());
  auto g = scatter_add_axis(flat, pos, reshape(cot, {-1}), 0);
  return {reshape(g, x.shape())};
}

std::vector<array> AsStrided::jvp(const std::vector<array>&,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {as_strided(tangents[0], shape_, strides_, offset_)};
}

std::pair<std::vector<array>, std::vector<int>> AsStrided::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto x = to_batch_first(inputs[0], axes[0], 1);
  int64_t step =
      x.shape(0) == 0 ? 0 : static_cast<int64_t>(x.size()) / x.shape(0);
  Strides strides = {step};
  strides.insert(strides.end(), strides_.begin(), strides_.end());
  return {{as_strided(x, prepend(x.shape(0), shape_), strides, offset_)}, {0}};
}

} // namespace kiln
