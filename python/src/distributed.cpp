// kiln.core.distributed: groups of processes and the collectives over them
// (MLX's mlx.core.distributed).
#include "kiln/distributed/communicator.h"
#include "kiln/distributed/distributed.h"
#include "kiln_py.h"

namespace kiln::py {

namespace dist = kiln::distributed;

void init_distributed(nb::module_& parent) {
  nb::module_ m = parent.def_submodule(
      "distributed",
      "Communication between processes. A program started by a launcher "
      "(python -m kiln.launch, or mpirun) forms a group of its processes "
      "with init(); without one, init() gives the singleton group, over "
      "which collectives return their input.");

  nb::class_<dist::Group>(m, "Group",
                          "A group of processes that communicate; init() "
                          "makes the global one, split() subgroups.")
      .def("rank", &dist::Group::rank, "This process's rank in the group.")
      .def("size", &dist::Group::size, "The number of processes.")
      .def("split", &dist::Group::split, "color"_a, "key"_a = -1,
           "The processes with the same color form a new group, ordered by "
           "key (-1 keeps this group's order); every process must call it.")
      .def_prop_ro("backend", &dist::Group::backend,
                   "The backend that formed the group ('mpi' or "
                   "'singleton').")
      .def("__repr__", [](const dist::Group& g) {
        return "Group(rank=" + std::to_string(g.rank()) +
               ", size=" + std::to_string(g.size()) + ", backend='" +
               g.backend() + "')";
      });

  m.def("is_available",
        [](const std::string& backend) { return dist::is_available(backend); },
        "backend"_a = "any",
        "Whether a backend that forms groups of several processes loads "
        "('mpi', or 'any').");
  m.def("_abort", &dist::detail::mpi_abort, "code"_a,
        "Ends every process of the MPI job with this exit code.");
  m.def("init", &dist::init, "strict"_a = false, "backend"_a = "any",
        "The global group, formed on the first call by the named backend "
        "('any' tries each). Without a launcher the singleton group, or with "
        "strict=True an error.");

  using Reduce = array (*)(const array&, std::optional<dist::Group>,
                           StreamOrDevice);
  auto collective = [&](const char* name, Reduce f, const char* doc) {
    m.def(
        name,
        [f](ArrayLike x, std::optional<dist::Group> group, const StreamArg& s) {
          return f(to_array(x), std::move(group), to_sod(s));
        },
        "x"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
        doc);
  };
  collective("all_sum", &dist::all_sum,
             "The elementwise sum of x over the group's processes.");
  collective("all_max", &dist::all_max,
             "The elementwise maximum of x over the group's processes.");
  collective("all_min", &dist::all_min,
             "The elementwise minimum of x over the group's processes.");
  collective("all_gather", &dist::all_gather,
             "The processes' arrays concatenated along axis 0 in rank order "
             "(a 0-d array gives one element per process).");
  collective("sum_scatter", &dist::sum_scatter,
             "The sum over the group, each process keeping its slice of "
             "axis 0 (whose size the group's size must divide).");
  m.def(
      "send",
      [](ArrayLike x, int dst, std::optional<dist::Group> group,
         const StreamArg& s) {
        return dist::send(to_array(x), dst, std::move(group), to_sod(s));
      },
      "x"_a, "dst"_a, nb::kw_only(), "group"_a = nb::none(),
      "stream"_a = nb::none(),
      "Sends x to process dst; the result is x, and evaluating it sends.");
  m.def(
      "recv",
      [](const ShapeArg& shape, Dtype dtype, int src,
         std::optional<dist::Group> group, const StreamArg& s) {
        return dist::recv(to_shape(shape), dtype, src, std::move(group),
                          to_sod(s));
      },
      "shape"_a, "dtype"_a, "src"_a, nb::kw_only(), "group"_a = nb::none(),
      "stream"_a = nb::none(),
      "An array of this shape and dtype received from process src.");
  m.def(
      "recv_like",
      [](ArrayLike x, int src, std::optional<dist::Group> group,
         const StreamArg& s) {
        return dist::recv_like(to_array(x), src, std::move(group), to_sod(s));
      },
      "x"_a, "src"_a, nb::kw_only(), "group"_a = nb::none(),
      "stream"_a = nb::none(),
      "An array shaped and typed like x received from process src.");
}

} // namespace kiln::py
