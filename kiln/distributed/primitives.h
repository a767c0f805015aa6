// The collectives and transfers as primitives of the graph (eval_cpu for
// host groups, eval_gpu for NCCL's; the op picks the stream). They are never
// equivalent to one another (compile must not merge two collectives) and
// hold their group, so a graph evaluated later still talks to it.
#pragma once

#include "kiln/core/primitive.h"
#include "kiln/distributed/communicator.h"
#include "kiln/distributed/distributed.h"

namespace kiln::distributed {

class DistributedPrimitive : public UnaryPrimitive {
 public:
  DistributedPrimitive(Stream s, Group group)
      : UnaryPrimitive(s), group_(std::move(group)) {}
  const Group& group() const { return group_; }
  detail::Communicator& comm() const { return *group_.communicator(); }

 private:
  Group group_;
};

class AllReduce : public DistributedPrimitive {
 public:
  AllReduce(Stream s, Group g, detail::ReduceOp op)
      : DistributedPrimitive(s, std::move(g)), op_(op) {}
  const char* name() const override;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  detail::ReduceOp op() const { return op_; }

 private:
  detail::ReduceOp op_;
};

class AllGather : public DistributedPrimitive {
 public:
  using DistributedPrimitive::DistributedPrimitive;
  const char* name() const override { return "all_gather"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

class ReduceScatter : public DistributedPrimitive {
 public:
  using DistributedPrimitive::DistributedPrimitive;
  const char* name() const override { return "sum_scatter"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_GRADS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
};

/** The output is the input, available once it is sent. */
class Send : public DistributedPrimitive {
 public:
  Send(Stream s, Group g, int dst) : DistributedPrimitive(s, std::move(g)),
                                     dst_(dst) {}
  const char* name() const override { return "send"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_DECLARE_VMAP
  int dst() const { return dst_; }

 private:
  int dst_;
};

class Recv : public DistributedPrimitive {
 public:
  Recv(Stream s, Group g, int src) : DistributedPrimitive(s, std::move(g)),
                                     src_(src) {}
  const char* name() const override { return "recv"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  int src() const { return src_; }

 private:
  int src_;
};

} // namespace kiln::distributed
