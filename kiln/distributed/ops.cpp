// The distributed ops: normalize and check arguments, choose the stream,
// build the primitive; and the primitives' transformation rules.
#include <sstream>

#include "kiln/distributed/primitives.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/utils.h"

namespace kiln::distributed {

namespace {

using detail::ReduceOp;

Group group_of(const std::optional<Group>& g) {
  return g ? *g : init();
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "all_sum";
    case ReduceOp::max: return "all_max";
    case ReduceOp::min: return "all_min";
  }
  return "all_reduce";
}

// MPI moves host memory: its collectives run on the CPU stream whatever
// device the caller named (a GPU input is read back by the evaluator).
// NCCL moves GPU memory: its collectives run on a GPU stream.
Stream communication_stream(const char* what, const Group& g,
                            StreamOrDevice s) {
  Stream st = to_stream(s);
  if (!g.communicator()->on_device()) {
    return st.device.type == Device::cpu ? st : default_stream(Device::cpu);
  }
  if (st.device.type != Device::gpu) {
    throw std::invalid_argument(
        std::string("[") + what + "] The '" + g.backend() + "' group moves "
        "GPU arrays but the op was asked to run on the CPU; use an 'mpi' "
        "group for host arrays.");
  }
  return st;
}

array all_reduce(const array& x, const std::optional<Group>& g,
                 StreamOrDevice s, ReduceOp op) {
  Group group = group_of(g);
  if (group.size() == 1) return x;
  bool device = group.communicator()->on_device();
  Dtype dt = x.dtype();
  if (device && (dt == int16 || dt == uint16)) {
    // NCCL has no 16-bit integers: int32 holds every value, and its sum
    // wraps back to the same 16 bits.
    array wide = astype(x, int32, s);
    return astype(all_reduce(wide, group, s, op), dt, s);
  }
  if (device && dt == complex64 && op != ReduceOp::sum) {
    throw std::invalid_argument(
        std::string("[") + reduce_name(op) + "] NCCL cannot order complex "
        "numbers; use an 'mpi' group or reduce the real parts.");
  }
  return array(x.shape(), x.dtype(),
               std::make_shared<AllReduce>(
                   communication_stream(reduce_name(op), group, s), group,
                   op),
               {x});
}

Shape gathered_shape(const Shape& in, int n) {
  Shape out = in;
  if (out.empty()) {
    out.push_back(n);
  } else {
    out[0] *= n;
  }
  return out;
}

void check_peer(const char* what, const char* role, int peer,
                const Group& g) {
  if (peer < 0 || peer >= g.size()) {
    std::ostringstream os;
    os << "[" << what << "] Invalid " << role << "=" << peer
       << " for a group of size " << g.size() << ".";
    throw std::invalid_argument(os.str());
  }
}

void check_not_singleton(const char* what, const Group& g) {
  if (g.size() == 1) {
    throw std::invalid_argument(std::string("[") + what + "] Cannot " +
                                (what[0] == 's' ? "send to" : "receive from") +
                                " a singleton group.");
  }
}

// all_gather and sum_scatter work along axis 0: an input batched on axis 0
// moves its batch axis to 1 first, so axis 0 stays the logical one.
std::pair<array, int> batch_off_axis0(const array& x, int axis) {
  if (axis < 0) return {x, -1};
  if (axis == 0) {
    if (x.ndim() == 1) return {expand_dims(x, 0), 1}; // a batch of 0-d
    return {moveaxis(x, 0, 1), 1};
  }
  return {x, axis};
}

} // namespace

array all_sum(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return all_reduce(x, g, s, ReduceOp::sum);
}
array all_max(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return all_reduce(x, g, s, ReduceOp::max);
}
array all_min(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return all_reduce(x, g, s, ReduceOp::min);
}

array all_gather(const array& x, std::optional<Group> g, StreamOrDevice s) {
  Group group = group_of(g);
  if (group.size() == 1) return x;
  return array(gathered_shape(x.shape(), group.size()), x.dtype(),
               std::make_shared<AllGather>(
                   communication_stream("all_gather", group, s), group),
               {x});
}

array sum_scatter(const array& x, std::optional<Group> g, StreamOrDevice s) {
  Group group = group_of(g);
  if (group.size() == 1) return x;
  if (x.ndim() == 0 || x.shape()[0] % group.size() != 0) {
    throw std::invalid_argument(
        "[sum_scatter] Invalid shape " + kiln::detail::shape_str(x.shape()) +
        " for a group of size " + std::to_string(group.size()) +
        ": axis 0 must exist and the group's size must divide it.");
  }
  Dtype dt = x.dtype();
  if (group.communicator()->on_device() && (dt == int16 || dt == uint16)) {
    // As all_sum: NCCL's int32 sum wraps back to the same 16 bits.
    return astype(sum_scatter(astype(x, int32, s), group, s), dt, s);
  }
  Shape shape = x.shape();
  shape[0] /= group.size();
  return array(std::move(shape), x.dtype(),
               std::make_shared<ReduceScatter>(
                   communication_stream("sum_scatter", group, s), group),
               {x});
}

array send(const array& x, int dst, std::optional<Group> g, StreamOrDevice s) {
  Group group = group_of(g);
  check_not_singleton("send", group);
  check_peer("send", "destination", dst, group);
  return array(x.shape(), x.dtype(),
               std::make_shared<Send>(communication_stream("send", group, s),
                                      group, dst),
               {x});
}

namespace {

array recv_as(const char* what, Shape shape, Dtype dtype, int src,
              const std::optional<Group>& g, StreamOrDevice s) {
  Group group = group_of(g);
  check_not_singleton(what, group);
  check_peer(what, "source", src, group);
  for (int d : shape) {
    if (d < 0) {
      throw std::invalid_argument(std::string("[") + what +
                                  "] a shape's dimensions must be "
                                  "non-negative.");
    }
  }
  return array(std::move(shape), dtype,
               std::make_shared<Recv>(communication_stream(what, group, s),
                                      group, src),
               std::vector<array>{});
}

} // namespace

array recv(Shape shape, Dtype dtype, int src, std::optional<Group> g,
           StreamOrDevice s) {
  return recv_as("recv", std::move(shape), dtype, src, g, s);
}

array recv_like(const array& x, int src, std::optional<Group> g,
                StreamOrDevice s) {
  return recv_as("recv_like", x.shape(), x.dtype(), src, g, s);
}

// --- Transformation rules -------------------------------------------------

const char* AllReduce::name() const { return reduce_name(op_); }

namespace {

array reduce_again(const array& x, ReduceOp op, const Group& g, Stream s) {
  switch (op) {
    case ReduceOp::sum: return all_sum(x, g, s);
    case ReduceOp::max: return all_max(x, g, s);
    case ReduceOp::min: return all_min(x, g, s);
  }
  return x;
}

// For all_max/all_min: where this process holds the extreme, as a fraction
// of the processes that hold it (ties share the derivative).
array winner_share(const array& x, const array& out, const Group& g,
                   Stream s) {
  array wins = astype(equal(x, out, s), x.dtype(), s);
  return divide(wins, all_sum(wins, g, s), s);
}

} // namespace

std::vector<array> AllReduce::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  if (op_ == ReduceOp::sum) return {all_sum(tangents[0], group(), stream())};
  array out = reduce_again(primals[0], op_, group(), stream());
  return {all_sum(multiply(tangents[0],
                           winner_share(primals[0], out, group(), stream()),
                           stream()),
                  group(), stream())};
}

// all_sum passes the cotangent through, as MLX's does: the processes
// share one loss, so each one's input gets that loss's cotangent.
std::vector<array> AllReduce::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>& outputs) {
  if (op_ == ReduceOp::sum) return cotangents;
  return {multiply(cotangents[0],
                   winner_share(primals[0], outputs[0], group(), stream()),
                   stream())};
}

std::pair<std::vector<array>, std::vector<int>> AllReduce::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{reduce_again(inputs[0], op_, group(), stream())}, axes};
}

std::vector<Shape> AllGather::output_shapes(const std::vector<array>& in) {
  return {gathered_shape(in[0].shape(), group().size())};
}

std::vector<array> AllGather::jvp(const std::vector<array>&,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {all_gather(tangents[0], group(), stream())};
}

std::vector<array> AllGather::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  const array& x = primals[0];
  int n = x.ndim() == 0 ? 1 : x.shape()[0];
  Shape start(cotangents[0].ndim(), 0);
  Shape stop = cotangents[0].shape();
  start[0] = group().rank() * n;
  stop[0] = start[0] + n;
  array part = slice(cotangents[0], start, stop, stream());
  return {x.ndim() == 0 ? reshape(part, {}, stream()) : part};
}

std::pair<std::vector<array>, std::vector<int>> AllGather::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto [x, axis] = batch_off_axis0(inputs[0], axes[0]);
  return {{all_gather(x, group(), stream())}, {axis}};
}

std::vector<Shape> ReduceScatter::output_shapes(
    const std::vector<array>& in) {
  Shape s = in[0].shape();
  s[0] /= group().size();
  return {s};
}

std::vector<array> ReduceScatter::jvp(const std::vector<array>&,
                                      const std::vector<array>& tangents,
                                      const std::vector<int>&) {
  return {sum_scatter(tangents[0], group(), stream())};
}

// Each process's slice of the sum carries the shared loss's cotangent for
// that slice: the input's cotangent is all of them gathered.
std::vector<array> ReduceScatter::vjp(const std::vector<array>&,
                                      const std::vector<array>& cotangents,
                                      const std::vector<int>&,
                                      const std::vector<array>&) {
  return {all_gather(cotangents[0], group(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> ReduceScatter::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto [x, axis] = batch_off_axis0(inputs[0], axes[0]);
  if (axis >= 0 && x.ndim() == 1) {
    throw std::invalid_argument(
        "[sum_scatter] under vmap each input needs an axis 0 to scatter.");
  }
  return {{sum_scatter(x, group(), stream())}, {axis}};
}

std::pair<std::vector<array>, std::vector<int>> Send::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{send(inputs[0], dst_, group(), stream())}, axes};
}

} // namespace kiln::distributed
