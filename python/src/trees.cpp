// The arrays of a pytree (dicts, modules, lists, tuples) in kiln.utils's
// flatten order, and writing new arrays over them in place: eval and
// compile's captured state walk whole models on every call, and a walk in
// C++ costs a fraction of the same walk in Python.
#include "kiln_py.h"

namespace kiln::py {

namespace {

// Calls take(leaf) for each array among t's leaves.
template <typename Take>
void collect(nb::handle t, Take& take) {
  RecursionGuard guard(" while walking a tree of arrays");
  if (nb::isinstance<array>(t)) {
    take(t);
  } else if (PyDict_Check(t.ptr())) {
    for (auto [k, v] : nb::borrow<nb::dict>(t)) collect(v, take);
  } else if (PyList_Check(t.ptr()) || PyTuple_Check(t.ptr())) {
    for (nb::handle v : t) collect(v, take);
  }
}

// Writes arrays[pos...] over the arrays of t; returns the next position.
size_t assign(nb::handle t, const nb::list& arrays, size_t pos) {
  RecursionGuard guard(" while walking a tree of arrays");
  auto next = [&]() -> nb::object {
    if (pos >= arrays.size()) {
      throw nb::value_error("[compile] fewer state arrays than the state holds.");
    }
    return arrays[pos++];
  };
  // One slot of a list or dict: an array is replaced, a subtree walked.
  auto slot = [&](nb::handle container, nb::handle key) {
    nb::object v = container[key];
    if (nb::isinstance<array>(v)) {
      container[key] = next();
    } else {
      pos = assign(v, arrays, pos);
    }
  };
  if (PyList_Check(t.ptr())) {
    size_t n = nb::len(t);
    for (size_t i = 0; i < n; ++i) slot(t, nb::int_(i));
  } else if (PyDict_Check(t.ptr())) {
    for (nb::handle k : nb::list(nb::borrow<nb::dict>(t).keys())) slot(t, k);
  } else if (PyTuple_Check(t.ptr())) {
    for (nb::handle v : t) {
      if (nb::isinstance<array>(v)) {
        throw nb::value_error(
            "[compile] arrays in a tuple cannot be updated in place; use a "
            "list or dict as output state.");
      }
      pos = assign(v, arrays, pos);
    }
  } else if (nb::isinstance<random::KeyState>(t)) {
    t.attr("__setitem__")(0, next());
  }
  return pos;
}

} // namespace

void init_trees(nb::module_& m) {
  // eval is called once per step on a few arrays or a whole model: the walk
  // and the call are one C++ function, with no Python frame around them.
  m.def(
      "eval",
      [](nb::args trees) {
        std::vector<array> arrays;
        auto take = [&](nb::handle a) {
          arrays.push_back(nb::cast<const array&>(a));
        };
        // eval(x) of one array, the common call, skips the walk.
        if (trees.size() == 1 && nb::isinstance<array>(trees[0])) {
          take(trees[0]);
        } else {
          collect(trees, take);
        }
        // Nothing to compute: no need to let go of the GIL.
        for (const array& a : arrays) {
          if (!a.is_available()) {
            eval_released(std::move(arrays));
            return;
          }
        }
      },
      nb::sig("def eval(*trees) -> None"),
      "Evaluate the arrays in the given pytrees (other leaves are "
      "ignored).");
  m.def(
      "_tree_arrays",
      [](nb::handle tree) {
        nb::list out;
        auto take = [&](nb::handle a) { out.append(a); };
        collect(tree, take);
        return out;
      },
      "tree"_a, "The arrays among tree's leaves, in kiln.utils's flatten order.");
  m.def(
      "_tree_assign",
      [](nb::handle tree, const nb::list& arrays) {
        assign(tree, arrays, 0);
      },
      "tree"_a, "arrays"_a,
      "Writes arrays over the arrays among tree's leaves, in place, in "
      "_tree_arrays's order.");
}

} // namespace kiln::py
