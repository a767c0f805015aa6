// eval_cpu of the distributed primitives: a contiguous copy of the input
// where needed, a fresh output (or the input's buffer, when nothing else
// holds it), then the group's backend.
#include "kiln/backend/cpu/copy.h"
#include "kiln/core/allocator.h"
#include "kiln/distributed/primitives.h"

namespace kiln::distributed {

using kiln::detail::row_major;

void AllReduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& x = inputs[0];
  array in = x;
  if (x.flags().row_contiguous && x.data_size() == x.size() &&
      x.is_donatable()) {
    out.move_shared_buffer(x);
    in = out;
  } else {
    in = row_major(x);
    out.set_data(allocator::malloc(out.nbytes()));
  }
  detail::all_reduce_checked(comm(), name(), out, in.data<void>(),
                             out.data<void>(), op());
}

void AllGather::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::check_agree(comm(), name(), inputs[0]);
  array in = row_major(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  comm().all_gather(in.data<void>(), out.data<void>(), in.nbytes(), name(),
                    nullptr);
}

void ReduceScatter::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::check_agree(comm(), name(), inputs[0]);
  array in = row_major(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  comm().reduce_scatter(in.data<void>(), out.data<void>(), out.size(),
                        in.dtype(), detail::ReduceOp::sum, name(), nullptr);
}

void Send::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::check_transfer(comm(), name(), inputs[0], dst(), true);
  array in = row_major(inputs[0]);
  comm().send(in.data<void>(), in.nbytes(), dst(), name(), nullptr);
  out.copy_shared_buffer(inputs[0]);
}

void Recv::eval_cpu(const std::vector<array>&, array& out) {
  detail::check_transfer(comm(), name(), out, src(), false);
  out.set_data(allocator::malloc(out.nbytes()));
  comm().recv(out.data<void>(), out.nbytes(), src(), name(), nullptr);
}

} // namespace kiln::distributed
