// The indexing ops take, take_along_axis and put_along_axis (the []
// operator is in indexing.cpp).
#include "kiln_py.h"

namespace kiln::py {

namespace {

bool is_int(nb::handle h) {
  return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr());
}

} // namespace

void init_ops_indexing(nb::module_& m) {
  m.def(
      "take",
      [](ArrayLike a, ArrayLike indices, std::optional<int> axis,
         const StreamArg& s) {
        array x = to_array(a);
        if (is_int(indices)) {
          int i = cast_arg<int>(indices, "take", "indices");
          return axis ? take(x, i, *axis, to_sod(s)) : take(x, i, to_sod(s));
        }
        array idx = to_array(indices);
        return axis ? take(x, idx, *axis, to_sod(s)) : take(x, idx, to_sod(s));
      },
      "a"_a, "indices"_a, "axis"_a = nb::none(),
      "stream"_a = nb::none(),
      "Elements at indices along axis (of the flattened a when None).");
  m.def(
      "take_along_axis",
      [](ArrayLike a, ArrayLike indices, std::optional<int> axis,
         const StreamArg& s) {
        array x = to_array(a), idx = to_array(indices);
        return axis ? take_along_axis(x, idx, *axis, to_sod(s))
                    : take_along_axis(x, idx, to_sod(s));
      },
      "a"_a, "indices"_a, "axis"_a.none() = -1,
      "stream"_a = nb::none(), "out[..., j, ...] = a[..., indices[j], ...].");
  m.def(
      "put_along_axis",
      [](ArrayLike a, ArrayLike indices, ArrayLike values,
         std::optional<int> axis, const StreamArg& s) {
        array x = to_array(a), idx = to_array(indices);
        array v = to_array_weak(values, x.dtype());
        if (axis) return put_along_axis(x, idx, v, *axis, to_sod(s));
        array flat =
            put_along_axis(reshape(x, {-1}, to_sod(s)),
                           reshape(idx, {-1}, to_sod(s)), v, 0, to_sod(s));
        return reshape(flat, x.shape(), to_sod(s));
      },
      "a"_a, "indices"_a, "values"_a, "axis"_a = nb::none(),
      "stream"_a = nb::none(), "a with values written at indices along axis.");
}

} // namespace kiln::py
