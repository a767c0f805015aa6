// __getitem__, __setitem__ and .at[] with NumPy's rules: ints (checked
// against the axis: IndexError), slices, Ellipsis, None and integer arrays,
// lowered to slice / gather and slice_update / scatter.
#include <algorithm>
#include <limits>

#include "kiln_py.h"

namespace kiln::py {

namespace {

// kiln.core.IndexError: an IndexError, as NumPy raises, that is also a
// ValueError, as MLX raises for every index it cannot take (NumPy's
// AxisError is both in the same way), so handlers written for either catch
// it.
PyObject* index_error_type() {
  static PyObject* type = [] {
    PyObject* bases = PyTuple_Pack(2, PyExc_IndexError, PyExc_ValueError);
    PyObject* t = PyErr_NewException("kiln.core.IndexError", bases, nullptr);
    Py_DECREF(bases);
    return t;
  }();
  return type;
}

[[noreturn]] void index_error(const std::string& msg) {
  PyErr_SetString(index_error_type(), msg.c_str());
  throw nb::python_error();
}

// How an index applies to an array. The result's dimensions, in order, are
// the tokens: 'S' a sliced axis, 'N' a new axis, 'B' the broadcast shape of
// the integer-array indices (one token for the whole block).
struct Plan {
  Shape start, stop, step;
  bool windowed = false;
  std::vector<int> int_axes;    // axes dropped by ints (no arrays)
  std::vector<int> adv_axes;    // axes indexed by arrays
  std::vector<array> adv_index; // one per adv axis
  std::vector<char> tokens;
  std::vector<int> token_axis;
};

bool is_int_index(nb::handle h) {
  if (PyBool_Check(h.ptr())) return false;
  if (PyLong_Check(h.ptr())) return true;
  // NumPy integer scalars.
  return PyIndex_Check(h.ptr()) && !nb::isinstance<array>(h) &&
         !(nb::hasattr(h, "ndim") && nb::cast<int>(h.attr("ndim")) != 0);
}

bool is_array_index(nb::handle h) {
  return nb::isinstance<array>(h) || PyList_Check(h.ptr()) ||
         nb::hasattr(h, "__array__");
}

// An integer index checked against an axis of n elements, as written (in
// [-n, n): negative counts from the end).
int32_t checked_int(nb::handle h, int32_t n, int axis) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(
      nb::steal(PyNumber_Index(h.ptr())).ptr(), &overflow);
  if (overflow || v < -static_cast<long long>(n) || v >= n) {
    index_error("index " + py_str(h) + " is out of bounds for axis " +
                std::to_string(axis) + " with size " + std::to_string(n) + ".");
  }
  return static_cast<int32_t>(v);
}

// A slice bound as the window keeps it: in int32, and far out of range
// still out of range (the window clamps it).
int32_t raw_bound(Py_ssize_t v) {
  constexpr Py_ssize_t lim = std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(std::clamp(v, -lim, lim));
}

Plan make_plan(const array& a, nb::handle index) {
  nb::tuple items = PyTuple_Check(index.ptr()) ? nb::borrow<nb::tuple>(index)
                                               : nb::make_tuple(index);
  int nd = static_cast<int>(a.ndim());
  int consumed = 0, ellipses = 0;
  bool has_array = false;
  for (nb::handle it : items) {
    if (it.is(nb::ellipsis())) {
      ++ellipses;
    } else if (!it.is_none()) {
      ++consumed;
      if (is_array_index(it)) has_array = true;
    }
  }
  if (ellipses > 1) index_error("an index can only have a single ellipsis.");
  if (consumed > nd) {
    index_error("too many indices for an array of " + std::to_string(nd) +
                " dimensions: " + std::to_string(consumed) + " were given.");
  }
  Plan p;
  p.start.assign(nd, 0);
  p.step.assign(nd, 1);
  p.stop.assign(nd, slice_end);
  int axis = 0;
  bool adv_run_open = false, adv_adjacent = true, adv_seen = false;
  auto full_slice = [&]() {
    p.tokens.push_back('S');
    p.token_axis.push_back(axis++);
    adv_run_open = false;
  };
  for (nb::handle it : items) {
    if (it.is(nb::ellipsis())) {
      for (int k = 0; k < nd - consumed; ++k) full_slice();
      continue;
    }
    if (it.is_none()) {
      p.tokens.push_back('N');
      p.token_axis.push_back(-1);
      adv_run_open = false;
      continue;
    }
    int32_t n = a.shape()[axis];
    if (PySlice_Check(it.ptr())) {
      Py_ssize_t start, stop, step;
      // Bounds as written must be 32-bit (MLX's rule; dimensions are).
      for (const char* part : {"start", "stop", "step"}) {
        nb::object v = it.attr(part);
        if (v.is_none() || !PyLong_Check(v.ptr())) continue;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
        if (overflow || x < INT32_MIN || x > INT32_MAX) {
          throw nb::value_error(
              ("Slice indices must be 32-bit integers; got " +
               nb::cast<std::string>(nb::str(v)) + ".")
                  .c_str());
        }
      }
      if (PySlice_Unpack(it.ptr(), &start, &stop, &step) < 0) {
        throw nb::python_error();
      }
      // The window keeps the bounds as written (an omitted stop runs through
      // the end), so under shapeless compile it follows a new axis size.
      p.start[axis] = raw_bound(start);
      p.stop[axis] = raw_bound(stop);
      p.step[axis] = static_cast<int32_t>(step);
      Py_ssize_t lo = start, hi = stop;
      PySlice_AdjustIndices(n, &lo, &hi, step);
      if (lo != 0 || hi != n || step != 1) p.windowed = true;
      full_slice();
      continue;
    }
    bool is_int = is_int_index(it);
    if (!is_int && !is_array_index(it)) {
      index_error(
          "only ints, slices, Ellipsis, None and integer arrays are "
          "valid indices; got " +
          py_type_name(it) + ".");
    }
    if (is_int && !has_array) {
      // As written: x[-1] stays the last element of a new size.
      int32_t i = checked_int(it, n, axis);
      p.start[axis] = i;
      p.stop[axis] = i == -1 ? slice_end : i + 1;
      p.windowed = true;
      p.int_axes.push_back(axis++);
      continue;
    }
    int32_t i = is_int ? checked_int(it, n, axis) : 0;
    array idx = is_int ? array(i < 0 ? i + n : i) : to_array(it);
    if (idx.dtype() == bool_) {
      index_error(
          "boolean mask indices are not supported; use integer "
          "indices (for example from a nonzero computed in NumPy).");
    }
    if (!is_integral(idx.dtype())) {
      index_error("arrays used as indices must be of integer type, got a " +
                  detail::describe(idx) + ".");
    }
    if (adv_seen && !adv_run_open) adv_adjacent = false;
    if (!adv_seen) {
      p.tokens.push_back('B');
      p.token_axis.push_back(-1);
    }
    adv_seen = adv_run_open = true;
    p.adv_axes.push_back(axis++);
    p.adv_index.push_back(idx);
  }
  while (axis < nd) full_slice();
  if (adv_seen && !adv_adjacent) {
    // Separated array indices put their block first (NumPy's rule).
    for (size_t k = 0; k < p.tokens.size(); ++k) {
      if (p.tokens[k] == 'B') {
        p.tokens.erase(p.tokens.begin() + k);
        p.token_axis.erase(p.token_axis.begin() + k);
        break;
      }
    }
    p.tokens.insert(p.tokens.begin(), 'B');
    p.token_axis.insert(p.token_axis.begin(), -1);
  }
  return p;
}

// The permutation from the canonical order [B..., S axes ascending] to the
// token order, and the positions of new axes in the result.
void token_layout(const Plan& p, int nb, std::vector<int>& perm,
                  std::vector<int>& new_axes) {
  int s_rank = 0, pos = 0;
  for (char t : p.tokens) {
    if (t == 'B') {
      for (int k = 0; k < nb; ++k) perm.push_back(k);
      pos += nb;
    } else if (t == 'S') {
      perm.push_back(nb + s_rank++);
      ++pos;
    } else {
      new_axes.push_back(pos++);
    }
  }
}

bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int>(i)) return false;
  }
  return true;
}

array window(const array& a, const Plan& p) {
  return p.windowed ? slice(a, p.start, p.stop, p.step) : a;
}

int block_rank(const Plan& p) {
  if (p.adv_index.empty()) return 0;
  Shape s;
  for (auto& i : p.adv_index)
    s = detail::broadcast_shapes(s, i.shape(), "index");
  return static_cast<int>(s.size());
}

// Canonical [B..., S...] form of an update for the indexed positions,
// shaped for slice_update (simple) or scatter (arrays).
array canonical_update(const array& a, const Plan& p, nb::handle index,
                       array upd) {
  Shape target = get_item(a, index).shape();
  while (upd.ndim() > target.size() && upd.shape(0) == 1) {
    upd = squeeze(upd, 0);
  }
  upd = broadcast_to(upd, target);
  int nb = block_rank(p);
  std::vector<int> perm, new_axes;
  token_layout(p, nb, perm, new_axes);
  if (!new_axes.empty()) upd = squeeze(upd, new_axes);
  if (!is_identity(perm)) {
    std::vector<int> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = i;
    upd = transpose(upd, inv);
  }
  if (p.adv_index.empty()) {
    return p.int_axes.empty() ? upd : expand_dims(upd, p.int_axes);
  }
  std::vector<int> ax;
  for (int x : p.adv_axes) ax.push_back(nb + x);
  return expand_dims(upd, ax);
}

} // namespace

array get_item(const array& a, nb::handle index) {
  Plan p = make_plan(a, index);
  array r = window(a, p);
  int nb = 0;
  if (!p.adv_index.empty()) {
    Shape sizes = r.shape();
    for (int ax : p.adv_axes) sizes[ax] = 1;
    r = gather(r, p.adv_index, p.adv_axes, sizes);
    nb = static_cast<int>(r.ndim() - a.ndim());
    std::vector<int> sq;
    for (int ax : p.adv_axes) sq.push_back(nb + ax);
    r = squeeze(r, sq);
  } else if (!p.int_axes.empty()) {
    r = squeeze(r, p.int_axes);
  }
  std::vector<int> perm, new_axes;
  token_layout(p, nb, perm, new_axes);
  if (!is_identity(perm)) r = transpose(r, perm);
  if (!new_axes.empty()) r = expand_dims(r, new_axes);
  return r;
}

// The index as a boolean mask (a Python bool, or an array or list of
// bools), or nothing: only a whole index selects a masked assignment.
std::optional<array> boolean_mask(nb::handle index) {
  if (PyBool_Check(index.ptr())) return array(index.ptr() == Py_True);
  if (!is_array_index(index)) return std::nullopt;
  if (nb::isinstance<array>(index)) {
    const array& m = nb::cast<const array&>(index);
    return m.dtype() == bool_ ? std::make_optional(m) : std::nullopt;
  }
  // NumPy arrays and scalars: only a bool dtype (kind "b") is a mask.
  if (nb::hasattr(index, "dtype")) {
    nb::object dt = index.attr("dtype");
    if (!nb::hasattr(dt, "kind") ||
        nb::cast<std::string>(dt.attr("kind")) != "b") {
      return std::nullopt;
    }
  }
  array m = to_array(index);
  if (m.dtype() == bool_) return m;
  return std::nullopt;
}

array set_item(const array& a, nb::handle index, nb::handle value) {
  array v = to_array_weak(value, a.dtype());
  if (auto mask = boolean_mask(index)) return masked_scatter(a, *mask, v);
  Plan p = make_plan(a, index);
  array upd = canonical_update(a, p, index, v);
  if (p.adv_index.empty()) {
    return slice_update(a, upd, p.start, p.stop, p.step);
  }
  array r = scatter(window(a, p), p.adv_index, upd, p.adv_axes);
  return p.windowed ? slice_update(a, r, p.start, p.stop, p.step) : r;
}

array update_item(const array& a, nb::handle index, nb::handle value,
                  const std::string& op) {
  array v = to_array_weak(value, a.dtype());
  Plan p = make_plan(a, index);
  if (p.adv_index.empty()) {
    array cur = get_item(a, index);
    array r = op == "add"        ? add(cur, v)
              : op == "subtract" ? subtract(cur, v)
              : op == "multiply" ? multiply(cur, v)
              : op == "divide"   ? divide(cur, v)
              : op == "maximum"  ? maximum(cur, v)
                                 : minimum(cur, v);
    return set_item(a, index, nb::cast(astype(r, a.dtype())));
  }
  array upd = canonical_update(a, p, index, v);
  array sub = window(a, p);
  array r = op == "add" ? scatter_add(sub, p.adv_index, upd, p.adv_axes)
            : op == "subtract"
                ? scatter_add(sub, p.adv_index, negative(upd), p.adv_axes)
            : op == "multiply" ? scatter_prod(sub, p.adv_index, upd, p.adv_axes)
            : op == "divide"
                ? scatter_prod(sub, p.adv_index, reciprocal(upd), p.adv_axes)
            : op == "maximum" ? scatter_max(sub, p.adv_index, upd, p.adv_axes)
                              : scatter_min(sub, p.adv_index, upd, p.adv_axes);
  return p.windowed ? slice_update(a, r, p.start, p.stop, p.step) : r;
}

namespace {

struct ArrayAt {
  array a;
};
struct ArrayAtIndex {
  array a;
  nb::object index;
};

} // namespace

void init_indexing(nb::module_& m, nb::class_<array>& cls) {
  m.attr("IndexError") = nb::handle(index_error_type());
  // An index may be None alone (x[None] adds an axis): nanobind refuses
  // None for an argument unless it is marked .none().
  cls.def(
         "__getitem__",
         [](const array& a, nb::handle index) { return get_item(a, index); },
         nb::arg("index").none())
      .def(
          "__setitem__",
          [](array& a, nb::handle index, nb::handle value) {
            a = set_item(a, index, value);
          },
          nb::arg("index").none(), nb::arg("value"))
      .def_prop_ro(
          "at", [](const array& a) { return ArrayAt{a}; },
          "Functional updates: a.at[idx].add(v) and friends, where "
          "repeated indices accumulate.");

  auto at = nb::class_<ArrayAt>(cls, "_ArrayAt");
  at.def(
      "__getitem__",
      [](const ArrayAt& at, nb::handle index) {
        return ArrayAtIndex{at.a, nb::borrow(index)};
      },
      nb::arg("index").none());
  // a.at.add(v) without an index is a mistake MLX reports as ValueError.
  for (const char* op :
       {"add", "subtract", "multiply", "divide", "maximum", "minimum"}) {
    std::string name = op;
    at.def(op, [name](const ArrayAt&, nb::handle) -> nb::object {
      throw nb::value_error(
          ("[at] index the array first: a.at[index]." + name + "(value).")
              .c_str());
    });
  }
  auto at_index = nb::class_<ArrayAtIndex>(cls, "_ArrayAtIndex");
  for (const char* op :
       {"add", "subtract", "multiply", "divide", "maximum", "minimum"}) {
    std::string name = op;
    at_index.def(
        op,
        [name](const ArrayAtIndex& at, nb::handle value) {
          return update_item(at.a, at.index, value, name);
        },
        "value"_a);
  }
}

} // namespace kiln::py
