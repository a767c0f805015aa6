// Shape and layout ops, slicing, splitting, joining, padding.
#include "kiln_py.h"

namespace kiln::py {

namespace {

std::vector<array> to_array_list(nb::handle seq) {
  std::vector<array> out;
  for (nb::handle h : seq) out.push_back(to_array(h));
  return out;
}

array atleast(nb::handle a, int nd);

nb::object atleast_each(nb::args arys, int nd) {
  if (arys.size() == 1) return nb::cast(atleast(arys[0], nd));
  nb::list out;
  for (auto a : arys) out.append(nb::cast(atleast(a, nd)));
  return out;
}

array atleast(nb::handle a, int nd) {
  array x = to_array(a);
  while (static_cast<int>(x.ndim()) < nd) {
    // NumPy: 1-d x becomes (1, n) for 2-d and (1, n, 1) for 3-d.
    x = (x.ndim() == 2) ? expand_dims(x, -1) : expand_dims(x, 0);
  }
  return x;
}

} // namespace

void init_ops_shape(nb::module_& m) {
  m.def(
      "reshape",
      [](ArrayLike a, const ShapeArg& shape, const StreamArg& s) {
        return reshape(to_array(a), to_shape(shape), to_sod(s));
      },
      "a"_a, "shape"_a, "stream"_a = nb::none(),
      "a with a new shape of the same size (one entry may be -1).");
  m.def(
      "flatten",
      [](ArrayLike a, int start, int end, const StreamArg& s) {
        return flatten(to_array(a), start, end, to_sod(s));
      },
      "a"_a, "start_axis"_a = 0, "end_axis"_a = -1,
      "stream"_a = nb::none(), "Merge axes [start_axis, end_axis].");
  m.def(
      "unflatten",
      [](ArrayLike a, int axis, const ShapeArg& shape, const StreamArg& s) {
        return unflatten(to_array(a), axis, to_shape(shape), to_sod(s));
      },
      "a"_a, "axis"_a, "shape"_a, "stream"_a = nb::none(),
      "Split one axis into the given shape.");
  m.def(
      "transpose",
      [](ArrayLike a, std::optional<std::vector<int>> axes,
         const StreamArg& s) {
        array x = to_array(a);
        return axes ? transpose(x, *axes, to_sod(s)) : transpose(x, to_sod(s));
      },
      "a"_a, "axes"_a = nb::none(), "stream"_a = nb::none(),
      "Permute the axes (reverse them when axes is None).");
  m.attr("permute_dims") = m.attr("transpose");
  m.def(
      "matrix_transpose",
      [](ArrayLike a, const StreamArg& s) {
        return swapaxes(to_array(a), -1, -2, to_sod(s));
      },
      "a"_a, "stream"_a = nb::none(), "Swap the last two axes.");
  m.def(
      "swapaxes",
      [](ArrayLike a, int a1, int a2, const StreamArg& s) {
        return swapaxes(to_array(a), a1, a2, to_sod(s));
      },
      "a"_a, "axis1"_a, "axis2"_a, "stream"_a = nb::none(),
      "Swap two axes.");
  m.def(
      "moveaxis",
      [](ArrayLike a, int src, int dst, const StreamArg& s) {
        return moveaxis(to_array(a), src, dst, to_sod(s));
      },
      "a"_a, "source"_a, "destination"_a,
      "stream"_a = nb::none(), "Move one axis to another position.");
  m.def(
      "broadcast_to",
      [](ArrayLike a, const ShapeArg& shape, const StreamArg& s) {
        return broadcast_to(to_array(a), to_shape(shape), to_sod(s));
      },
      "a"_a, "shape"_a, "stream"_a = nb::none(),
      "Broadcast a to a shape (a view).");
  m.def(
      "broadcast_arrays",
      [](nb::args arrays, const StreamArg& s) {
        return broadcast_arrays(to_array_list(arrays), to_sod(s));
      },
      "arrays"_a, "stream"_a = nb::none(),
      "Broadcast arrays against one another.");
  m.def(
      "broadcast_shapes",
      [](nb::args shapes) {
        if (shapes.size() == 0) {
          throw std::invalid_argument(
              "[broadcast_shapes] needs at least one shape.");
        }
        Shape out;
        for (nb::handle h : shapes) {
          out = detail::broadcast_shapes(
              out,
              to_shape(cast_arg<ShapeArg>(h, "broadcast_shapes", "a shape")),
              "broadcast_shapes");
        }
        return nb::tuple(nb::cast(std::vector<int>(out.begin(), out.end())));
      },
      "shapes"_a, "The broadcast of the shapes.");
  m.def(
      "expand_dims",
      [](ArrayLike a, const std::variant<int, std::vector<int>>& axis,
         const StreamArg& s) {
        array x = to_array(a);
        if (auto* i = std::get_if<int>(&axis)) {
          return expand_dims(x, *i, to_sod(s));
        }
        return expand_dims(x, std::get<std::vector<int>>(axis), to_sod(s));
      },
      "a"_a, "axis"_a, "stream"_a = nb::none(),
      "Insert size-1 axes.");
  m.def(
      "squeeze",
      [](ArrayLike a, const AxisArg& axis, const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return squeeze(x, to_sod(s));
        return squeeze(x, axes_of(axis, x.ndim()), to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "stream"_a = nb::none(),
      "Remove size-1 axes (all of them when axis is None).");
  m.def(
      "contiguous",
      [](ArrayLike a, bool allow_col_major, const StreamArg& s) {
        return contiguous(to_array(a), allow_col_major, to_sod(s));
      },
      "a"_a, "allow_col_major"_a = false,
      "stream"_a = nb::none(), "A row-major copy unless already one.");
  m.def(
      "view",
      [](ArrayLike a, Dtype d, const StreamArg& s) {
        return view(to_array(a), d, to_sod(s));
      },
      "a"_a, "dtype"_a, "stream"_a = nb::none(),
      "The same bytes seen as another dtype.");
  m.def(
      "atleast_1d",
      [](nb::args arys, const StreamArg&) { return atleast_each(arys, 1); },
      "arys"_a, "stream"_a = nb::none(),
      "Each array with ndim >= 1 (one array for one argument, else a list).");
  m.def(
      "atleast_2d",
      [](nb::args arys, const StreamArg&) { return atleast_each(arys, 2); },
      "arys"_a, "stream"_a = nb::none(),
      "Each array with ndim >= 2 (one array for one argument, else a list).");
  m.def(
      "atleast_3d",
      [](nb::args arys, const StreamArg&) { return atleast_each(arys, 3); },
      "arys"_a, "stream"_a = nb::none(),
      "Each array with ndim >= 3 (one array for one argument, else a list).");

  m.def(
      "slice",
      [](ArrayLike a, nb::handle start, const std::vector<int>& axes,
         const ShapeArg& size, const StreamArg& s) {
        return slice(to_array(a), to_array(start), axes, to_shape(size),
                     to_sod(s));
      },
      "a"_a, "start_indices"_a, "axes"_a, "slice_size"_a,
      "stream"_a = nb::none(),
      "A window of slice_size starting at the (array) start_indices.");
  m.def(
      "slice_update",
      [](ArrayLike a, ArrayLike update, nb::handle start,
         const std::vector<int>& axes, const StreamArg& s) {
        array x = to_array(a);
        return slice_update(x, to_array_weak(update, x.dtype()),
                            to_array(start), axes, to_sod(s));
      },
      "a"_a, "update"_a, "start_indices"_a, "axes"_a,
      "stream"_a = nb::none(), "a with a window replaced by update.");
  m.def(
      "as_strided",
      [](ArrayLike a, std::optional<std::vector<int>> shape,
         std::optional<std::vector<int64_t>> strides, size_t offset,
         const StreamArg& s) {
        array x = to_array(a);
        Shape sh = shape ? Shape(shape->begin(), shape->end()) : x.shape();
        Strides st = strides ? Strides(strides->begin(), strides->end())
                             : row_major_strides(sh);
        return as_strided(x, sh, st, offset, to_sod(s));
      },
      "a"_a, "shape"_a = nb::none(), "strides"_a = nb::none(), "offset"_a = 0,
      "stream"_a = nb::none(),
      "A view with the given shape, strides and offset (in elements).");
  m.def(
      "split",
      [](ArrayLike a, const std::variant<int, std::vector<int>>& ios, int axis,
         const StreamArg& s) {
        array x = to_array(a);
        if (auto* n = std::get_if<int>(&ios)) {
          return split(x, *n, axis, to_sod(s));
        }
        auto& v = std::get<std::vector<int>>(ios);
        return split(x, Shape(v.begin(), v.end()), axis, to_sod(s));
      },
      "a"_a, "indices_or_sections"_a, "axis"_a = 0,
      "stream"_a = nb::none(),
      "Equal sections, or pieces between the given indices, along axis.");
  m.def(
      "flip",
      [](ArrayLike a, const AxisArg& axis, const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return flip(x, to_sod(s));
        return flip(x, axes_of(axis, x.ndim()), to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "stream"_a = nb::none(),
      "Reverse the order of elements along the axes (all when None).");
  m.def(
      "roll",
      [](ArrayLike a, const std::variant<int, std::vector<int>>& shift,
         const AxisArg& axis, const StreamArg& s) {
        array x = to_array(a);
        auto* one = std::get_if<int>(&shift);
        if (!axis) {
          // Without axes the flattened array rolls by the total shift, as
          // MLX.
          int total = 0;
          if (one) {
            total = *one;
          } else {
            for (int v : std::get<std::vector<int>>(shift)) total += v;
          }
          return roll(x, total, to_sod(s));
        }
        auto axes = axes_of(axis, x.ndim());
        if (one) return roll(x, *one, axes, to_sod(s));
        auto& v = std::get<std::vector<int>>(shift);
        return roll(x, Shape(v.begin(), v.end()), axes, to_sod(s));
      },
      "a"_a, "shift"_a, "axis"_a = nb::none(),
      "stream"_a = nb::none(),
      "Shift elements along the axes, wrapping around (the flattened array "
      "when axis is None).");
  m.def(
      "diagonal",
      [](ArrayLike a, int offset, int axis1, int axis2, const StreamArg& s) {
        return diagonal(to_array(a), offset, axis1, axis2, to_sod(s));
      },
      "a"_a, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1,
      "stream"_a = nb::none(),
      "The diagonal at offset of the 2-d sub-arrays over axis1 and axis2, "
      "as the last axis.");
  m.def(
      "diag",
      [](ArrayLike a, int k, const StreamArg& s) {
        return diag(to_array(a), k, to_sod(s));
      },
      "a"_a, "k"_a = 0, "stream"_a = nb::none(),
      "The k-th diagonal of a 2-d array, or the matrix with a 1-d array on "
      "its k-th diagonal.");
  m.def(
      "unstack",
      [](ArrayLike a, int axis, const StreamArg& s) {
        auto parts = unstack(to_array(a), axis, to_sod(s));
        nb::list items;
        for (auto& p : parts) items.append(nb::cast(p));
        return nb::tuple(items);
      },
      "x"_a, nb::kw_only(), "axis"_a = 0, "stream"_a = nb::none(),
      "The slices along axis, each without it (the inverse of stack).");
  m.def(
      "diff",
      [](ArrayLike a, int n, int axis, const StreamArg& s) {
        return diff(to_array(a), n, axis, to_sod(s));
      },
      "a"_a, "n"_a = 1, "axis"_a = -1, "stream"_a = nb::none(),
      "The n-th discrete difference along axis.");
  m.def(
      "concatenate",
      [](nb::handle arrays, std::optional<int> axis, const StreamArg& s) {
        auto v = to_array_list(arrays);
        return axis ? concatenate(v, *axis, to_sod(s))
                    : concatenate(v, to_sod(s));
      },
      "arrays"_a, "axis"_a.none() = 0, "stream"_a = nb::none(),
      "Join arrays along an axis (flattened when axis is None).");
  m.attr("concat") = m.attr("concatenate");
  m.def(
      "stack",
      [](nb::handle arrays, int axis, const StreamArg& s) {
        return stack(to_array_list(arrays), axis, to_sod(s));
      },
      "arrays"_a, "axis"_a = 0, "stream"_a = nb::none(),
      "Join arrays along a new axis.");
  m.def(
      "repeat",
      [](ArrayLike a, int repeats, std::optional<int> axis,
         const StreamArg& s) {
        array x = to_array(a);
        return axis ? repeat(x, repeats, *axis, to_sod(s))
                    : repeat(x, repeats, to_sod(s));
      },
      "array"_a, "repeats"_a, "axis"_a = nb::none(),
      "stream"_a = nb::none(), "Repeat each element along an axis.");
  m.def(
      "tile",
      [](ArrayLike a, const ShapeArg& reps, const StreamArg& s) {
        Shape r = to_shape(reps);
        return tile(to_array(a), std::vector<int>(r.begin(), r.end()),
                    to_sod(s));
      },
      "a"_a, "reps"_a, "stream"_a = nb::none(),
      "a repeated reps times along each axis.");
  m.def(
      "pad",
      [](ArrayLike a, nb::handle pad_width, const std::string& mode,
         nb::handle value, const StreamArg& s) {
        array x = to_array(a);
        array v = to_array_weak(value, x.dtype());
        if (PyLong_Check(pad_width.ptr())) {
          return pad(x, cast_arg<int>(pad_width, "pad", "pad_width"), v, mode,
                     to_sod(s));
        }
        std::vector<std::pair<int, int>> pairs;
        if (!nb::isinstance<nb::sequence>(pad_width)) {
          throw nb::type_error(("[pad] pad_width must be an int or a "
                                "sequence, got " +
                                py_type_name(pad_width) + ".")
                                   .c_str());
        }
        nb::list items = nb::list(pad_width);
        bool flat = nb::len(items) > 0 && PyLong_Check(items[0].ptr());
        if (flat) {
          auto w = cast_arg<std::vector<int>>(items, "pad", "pad_width");
          if (w.size() == 1) return pad(x, w[0], v, mode, to_sod(s));
          if (w.size() != 2) {
            throw nb::value_error(
                "[pad] pad_width must be an int, a pair or "
                "one pair per axis.");
          }
          return pad(x, std::pair{w[0], w[1]}, v, mode, to_sod(s));
        }
        for (nb::handle h : items) {
          auto w = cast_arg<std::vector<int>>(h, "pad", "pad_width");
          if (w.size() == 1) w.push_back(w[0]);
          if (w.size() != 2) {
            throw nb::value_error("[pad] each pad_width entry must be a pair.");
          }
          pairs.emplace_back(w[0], w[1]);
        }
        if (pairs.size() == 1) return pad(x, pairs[0], v, mode, to_sod(s));
        return pad(x, pairs, v, mode, to_sod(s));
      },
      "a"_a, "pad_width"_a, "mode"_a = "constant", "constant_values"_a = 0,
      "stream"_a = nb::none(),
      "Pad with a constant, the edge values or a reflection.");
}

} // namespace kiln::py
