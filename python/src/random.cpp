// kiln.core.random: Threefry keys, the global key state and samplers.
#include "kiln_py.h"

namespace kiln::py {

namespace {

using random::KeyState;

std::optional<array> key_of(nb::handle key) {
  if (key.is_none()) return std::nullopt;
  return to_array(key);
}

int checked_state_index(nb::handle i) {
  long v = cast_arg<long>(i, "random.state", "the index");
  if (v != 0 && v != -1) {
    throw nb::index_error(
        "[random.state] the state holds one key; only "
        "index 0 (or -1) is valid.");
  }
  return 0;
}

} // namespace

void init_random(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("random", "Random sampling.");

  nb::class_<KeyState>(m, "KeyState",
                       "The global random state: a list-like container of "
                       "one key, which compile can capture as state.")
      .def("__len__", &KeyState::size)
      .def("__getitem__",
           [](const KeyState& st, nb::handle i) {
             checked_state_index(i);
             return st.get();
           })
      .def("__setitem__",
           [](KeyState& st, nb::handle i, nb::handle key) {
             checked_state_index(i);
             array k = to_array(key);
             if (k.dtype() != uint32 || k.shape() != Shape{2}) {
               throw nb::value_error(
                   "[random.state] a key is a uint32 array "
                   "of shape (2,).");
             }
             st.set(k);
           })
      .def("__iter__",
           [](const KeyState& st) {
             nb::list l;
             l.append(st.get());
             return nb::iter(l);
           })
      .def("__repr__", [](const KeyState&) {
        return std::string("<kiln.core.random.state: one key>");
      });
  m.attr("state") = nb::cast(&random::state(), nb::rv_policy::reference);

  m.def(
      "seed", [](uint64_t s) { random::seed(s); }, "seed"_a,
      "Seed the global random state.");
  m.def(
      "key", [](uint64_t s) { return random::key(s); }, "seed"_a,
      "A key from a seed.");
  m.def(
      "split",
      [](nb::handle key, int num, const StreamArg& s) {
        return random::split(to_array(key), num, to_sod(s));
      },
      "key"_a, "num"_a = 2, "stream"_a = nb::none(),
      "Split a key into num keys, an array of shape (num, 2).");
  m.def(
      "bits",
      [](const ShapeArg& shape, int width, nb::handle key, const StreamArg& s) {
        return random::bits(to_shape(shape), width, key_of(key), to_sod(s));
      },
      "shape"_a = std::vector<int>{}, "width"_a = 4, "key"_a = nb::none(),
      "stream"_a = nb::none(), "Random bits.");
  m.def(
      "uniform",
      [](ArrayLike low, ArrayLike high, const ShapeArg& shape,
         std::optional<Dtype> d, nb::handle key, const StreamArg& s) {
        Dtype dt = d.value_or(float32);
        return random::uniform(to_array_weak(low, dt), to_array_weak(high, dt),
                               to_shape(shape), dt, key_of(key), to_sod(s));
      },
      "low"_a = 0, "high"_a = 1, "shape"_a = std::vector<int>{},
      "dtype"_a.none() = float32, "key"_a = nb::none(), "stream"_a = nb::none(),
      "Uniform samples in [low, high).");
  m.def(
      "normal",
      [](const ShapeArg& shape, std::optional<Dtype> d, nb::handle loc,
         nb::handle scale, nb::handle key, const StreamArg& s) {
        Dtype dt = d.value_or(float32);
        std::optional<array> l, sc;
        if (!loc.is_none()) l = to_array_weak(loc, dt);
        if (!scale.is_none()) sc = to_array_weak(scale, dt);
        return random::normal(to_shape(shape), dt, l, sc, key_of(key),
                              to_sod(s));
      },
      "shape"_a = std::vector<int>{}, "dtype"_a.none() = float32,
      "loc"_a = nb::none(), "scale"_a = nb::none(), "key"_a = nb::none(),
      "stream"_a = nb::none(),
      "Normal samples with mean loc and standard deviation scale.");
  m.def(
      "randint",
      [](ArrayLike low, ArrayLike high, const ShapeArg& shape,
         std::optional<Dtype> d, nb::handle key, const StreamArg& s) {
        Dtype dt = d.value_or(int32);
        return random::randint(to_array_weak(low, dt), to_array_weak(high, dt),
                               to_shape(shape), dt, key_of(key), to_sod(s));
      },
      "low"_a, "high"_a, "shape"_a = std::vector<int>{}, "dtype"_a.none() = int32,
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Integers in [low, high).");
  m.def(
      "bernoulli",
      [](ArrayLike p, std::optional<ShapeArg> shape, nb::handle key,
         const StreamArg& s) {
        // Not weak: an int or bool p is refused, as MLX refuses it.
        array pa = to_array(p);
        if (shape) {
          return random::bernoulli(pa, to_shape(*shape), key_of(key),
                                   to_sod(s));
        }
        return random::bernoulli(pa, key_of(key), to_sod(s));
      },
      "p"_a = 0.5, "shape"_a = nb::none(), "key"_a = nb::none(), "stream"_a = nb::none(), "Booleans that are true with probability p.");
  m.def(
      "truncated_normal",
      [](ArrayLike lower, ArrayLike upper, std::optional<ShapeArg> shape,
         std::optional<Dtype> d, nb::handle key, const StreamArg& s) {
        Dtype dt = d.value_or(float32);
        array lo = to_array_weak(lower, dt), hi = to_array_weak(upper, dt);
        if (shape) {
          return random::truncated_normal(lo, hi, to_shape(*shape), dt,
                                          key_of(key), to_sod(s));
        }
        return random::truncated_normal(lo, hi, dt, key_of(key), to_sod(s));
      },
      "lower"_a, "upper"_a, "shape"_a = nb::none(), "dtype"_a.none() = float32,
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Normal samples truncated to [lower, upper].");
  m.def(
      "gumbel",
      [](const ShapeArg& shape, std::optional<Dtype> d, nb::handle key,
         const StreamArg& s) {
        return random::gumbel(to_shape(shape), d.value_or(float32), key_of(key),
                              to_sod(s));
      },
      "shape"_a = std::vector<int>{}, "dtype"_a.none() = float32,
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Samples from the standard Gumbel distribution.");
  m.def(
      "laplace",
      [](const ShapeArg& shape, std::optional<Dtype> d, float loc, float scale,
         nb::handle key, const StreamArg& s) {
        return random::laplace(to_shape(shape), d.value_or(float32), loc, scale,
                               key_of(key), to_sod(s));
      },
      "shape"_a = std::vector<int>{}, "dtype"_a.none() = float32, "loc"_a = 0.0f,
      "scale"_a = 1.0f, "key"_a = nb::none(), "stream"_a = nb::none(),
      "Samples from the Laplace distribution.");
  m.def(
      "multivariate_normal",
      [](ArrayLike mean, ArrayLike cov, const ShapeArg& shape,
         std::optional<Dtype> d, nb::handle key, const StreamArg& s) {
        return random::multivariate_normal(to_array(mean), to_array(cov),
                                           to_shape(shape), d.value_or(float32),
                                           key_of(key), to_sod(s));
      },
      "mean"_a, "cov"_a, "shape"_a = std::vector<int>{}, "dtype"_a.none() = float32,
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Jointly normal samples with the given mean and covariance.");
  m.def(
      "categorical",
      [](ArrayLike logits, int axis, std::optional<ShapeArg> shape,
         std::optional<int> num_samples, nb::handle key, const StreamArg& s) {
        array l = to_array(logits);
        if (shape && num_samples) {
          throw nb::value_error(
              "[categorical] give at most one of shape and num_samples.");
        }
        if (shape) {
          return random::categorical(l, axis, to_shape(*shape), key_of(key),
                                     to_sod(s));
        }
        if (num_samples) {
          return random::categorical(l, axis, *num_samples, key_of(key),
                                     to_sod(s));
        }
        return random::categorical(l, axis, key_of(key), to_sod(s));
      },
      "logits"_a, "axis"_a = -1, "shape"_a = nb::none(),
      "num_samples"_a = nb::none(), "key"_a = nb::none(), "stream"_a = nb::none(),
      "Category indices drawn from unnormalized log-probabilities.");
  m.def(
      "permutation",
      [](ArrayLike x, int axis, nb::handle key, const StreamArg& s) {
        if (PyLong_Check(x.ptr())) {
          return random::permutation(
              cast_arg<int>(x, "random.permutation", "x"), key_of(key),
              to_sod(s));
        }
        return random::permutation(to_array(x), axis, key_of(key), to_sod(s));
      },
      "x"_a, "axis"_a = 0, "key"_a = nb::none(), "stream"_a = nb::none(),
      "A permutation of range(x), or x shuffled along axis.");
}

} // namespace kiln::py
