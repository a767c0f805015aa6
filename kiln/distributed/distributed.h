// Communication between processes, with MLX's API (mlx.core.distributed).
// A Group is a set of processes formed by a backend on a trusted engine:
// MPI (OpenMPI, loaded at run time) for host arrays, NCCL (loaded at run
// time) for GPU arrays, one GPU per process. Without a backend, or
// in a program started without a launcher, init() gives the singleton
// group: collectives return their input and point-to-point calls raise.
// The collectives are lazy primitives: they run when evaluated, in the
// order the graph is evaluated, which every process must share.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::distributed {

namespace detail {
class Communicator;
}

class Group {
 public:
  explicit Group(std::shared_ptr<detail::Communicator> comm);
  int rank() const;
  int size() const;
  /** The processes of this group with the same color form a new group,
   *  ordered by key (a negative key keeps this group's order). Every
   *  process of the group must call it. */
  Group split(int color, int key = -1) const;
  /** The backend's name: "mpi", "nccl", or "singleton". */
  std::string backend() const;
  const std::shared_ptr<detail::Communicator>& communicator() const {
    return comm_;
  }

 private:
  std::shared_ptr<detail::Communicator> comm_;
};

/** Whether a backend can form a group of several processes: "mpi",
 *  "nccl", or "any" for any of them. Raises for an unknown name. */
bool is_available(const std::string& backend = "any");

/** The global group of a backend. The first call forms it; later calls
 *  return it. "any" takes the launcher's backend (KILN_BACKEND), else MPI
 *  under mpirun, else NCCL for the launcher's local processes. Without a
 *  usable backend the singleton group, or with `strict` an error. */
Group init(bool strict = false, const std::string& backend = "any");

array all_sum(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
array all_max(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
array all_min(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
/** The processes' arrays concatenated along axis 0 (a 0-d array gives one
 *  element per process). */
array all_gather(const array& x, std::optional<Group> group = std::nullopt,
                 StreamOrDevice s = {});
/** The sum over the group, each process keeping its slice of axis 0 (whose
 *  size the group's size must divide). */
array sum_scatter(const array& x, std::optional<Group> group = std::nullopt,
                  StreamOrDevice s = {});
/** Sends x to process dst; the result is x, evaluated once it is sent. */
array send(const array& x, int dst, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
array recv(Shape shape, Dtype dtype, int src,
           std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array recv_like(const array& x, int src,
                std::optional<Group> group = std::nullopt,
                StreamOrDevice s = {});

} // namespace kiln::distributed
