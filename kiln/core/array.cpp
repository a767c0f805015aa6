#include "kiln/core/array.h"

#include <string>

#include "kiln/core/layout.h"
#include "kiln/core/primitive.h"
#include "kiln/transforms/eval.h"

namespace kiln {

namespace {
std::string shape_string(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}
} // namespace

Strides row_major_strides(const Shape& shape) {
  Strides strides(shape.size(), 1);
  // Wrapping products: they only overflow for an empty array (a zero
  // dimension elsewhere), whose strides no kernel reads; any other shape
  // that large is refused by the size check.
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = static_cast<int64_t>(
        static_cast<uint64_t>(strides[i + 1]) *
        static_cast<uint64_t>(std::max<int64_t>(shape[i + 1], 1)));
  }
  return strides;
}

size_t shape_size(const Shape& shape) {
  size_t size = 1;
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument("[array] negative dimension " +
                                  std::to_string(d) + " in shape.");
    }
    if (d != 0 && size > SIZE_MAX / static_cast<size_t>(d)) {
      throw std::invalid_argument("[array] the size of shape " +
                                  shape_string(shape) + " overflows.");
    }
    size *= static_cast<size_t>(d);
  }
  return size;
}

array::ArrayDesc::ArrayDesc(Shape shape_, Dtype dtype_)
    : shape(std::move(shape_)),
      strides(row_major_strides(shape)),
      size(shape_size(shape)),
      dtype(dtype_) {
  // Byte counts and offsets are int64 everywhere; a shape whose bytes do not
  // fit is refused when the op is built, not when a kernel overflows.
  if (dtype.size > 0 && size > static_cast<size_t>(INT64_MAX) / dtype.size) {
    throw std::invalid_argument(
        "[array] shape " + shape_string(shape) + " of " + dtype_name(dtype) +
        " needs more than 2^63 bytes.");
  }
}

// Destroying the last handle of a long graph would recurse once per node
// (a node owns its inputs, each input its node). The outermost destructor on
// a thread owns a stack of nodes to release; any descriptor dying while it
// runs hands its node to that stack instead of releasing it in place, so the
// depth is one level whatever the graph's shape: chains, repeated inputs,
// siblings, graphs held by primitives (compiled tapes, custom functions).
namespace {
thread_local std::vector<std::shared_ptr<void>>* pending_nodes = nullptr;
} // namespace

array::ArrayDesc::~ArrayDesc() {
  if (!node || node.use_count() > 1) return; // a sibling still holds it
  if (pending_nodes) {
    pending_nodes->push_back(std::move(node));
    return;
  }
  std::vector<std::shared_ptr<void>> stack;
  pending_nodes = &stack;
  stack.push_back(std::move(node));
  while (!stack.empty()) {
    auto n = std::move(stack.back());
    stack.pop_back();
    n.reset(); // may push the nodes of inputs that die with it
  }
  pending_nodes = nullptr;
}

array::array(allocator::Buffer data, Shape shape, Dtype dtype, Deleter d)
    : desc_(std::make_shared<ArrayDesc>(std::move(shape), dtype)) {
  set_data(data, std::move(d));
  set_status(Status::available);
}

namespace {
// An output's descriptor; a shape too large for its bytes names the op.
template <typename Desc>
std::shared_ptr<Desc> make_output_desc(Shape shape, Dtype dtype,
                                       const Primitive& p) {
  try {
    return std::make_shared<Desc>(std::move(shape), dtype);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    throw std::invalid_argument("[" + std::string(p.name()) + "] " +
                                what.substr(what.find(']') + 2));
  }
}
} // namespace

array::array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
             std::vector<array> inputs)
    : desc_(make_output_desc<ArrayDesc>(std::move(shape), dtype,
                                        *primitive)) {
  auto node = std::make_shared<Node>();
  node->primitive = std::move(primitive);
  node->inputs = std::move(inputs);
  node->outputs.push_back(desc_);
  for (auto& in : node->inputs) {
    if (in.desc_->is_tracer) desc_->is_tracer = detail::in_tracing();
  }
  desc_->node = std::move(node);
}

array array::uninitialized(Shape shape, Dtype dtype) {
  return array(std::make_shared<ArrayDesc>(std::move(shape), dtype));
}

std::vector<array> array::make_arrays(
    std::vector<Shape> shapes, const std::vector<Dtype>& dtypes,
    const std::shared_ptr<Primitive>& primitive,
    const std::vector<array>& inputs) {
  auto node = std::make_shared<Node>();
  node->primitive = primitive;
  node->inputs = inputs;
  node->dtypes = dtypes;
  std::vector<array> outs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto d = make_output_desc<ArrayDesc>(shapes[i], dtypes[i], *primitive);
    d->position = static_cast<uint32_t>(i);
    d->node = node;
    for (auto& in : inputs) {
      if (in.desc_->is_tracer) d->is_tracer = detail::in_tracing();
    }
    node->outputs.push_back(d);
    outs.push_back(array(std::move(d)));
  }
  node->shapes = std::move(shapes);
  return outs;
}

int array::shape(int dim) const {
  int n = static_cast<int>(ndim());
  if (dim < -n || dim >= n) {
    throw std::invalid_argument("[array::shape] axis " + std::to_string(dim) +
                                " out of range for " + std::to_string(n) +
                                " dimensions.");
  }
  return desc_->shape[dim < 0 ? dim + n : dim];
}

int64_t array::strides(int dim) const {
  int n = static_cast<int>(ndim());
  if (dim < -n || dim >= n) {
    throw std::invalid_argument("[array::strides] axis " +
                                std::to_string(dim) + " out of range.");
  }
  return desc_->strides[dim < 0 ? dim + n : dim];
}

void array::eval() {
  if (!is_available()) kiln::eval({*this});
}

void array::wait() {
  if (status() == Status::available) return;
  // Not only while scheduled: a failed background evaluation resets its
  // arrays to unscheduled, possibly before wait() is called, and the error
  // is kept in the event until the array is evaluated again.
  if (auto event = desc_->event) event->wait();
}

Primitive& array::primitive() const { return *desc_->node->primitive; }

const std::shared_ptr<Primitive>& array::primitive_ptr() const {
  return desc_->node->primitive;
}

const std::vector<array>& array::inputs() const { return desc_->node->inputs; }
std::vector<array>& array::inputs() { return desc_->node->inputs; }

std::vector<array> array::outputs() const {
  std::vector<array> outs;
  if (!desc_->node) {
    outs.push_back(*this);
    return outs;
  }
  auto& node = *desc_->node;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (auto d = node.outputs[i].lock()) {
      outs.push_back(array(std::move(d)));
    } else {
      // Nobody holds this output any more; give the kernel a scratch one.
      auto scratch =
          std::make_shared<ArrayDesc>(node.shapes[i], node.dtypes[i]);
      scratch->position = static_cast<uint32_t>(i);
      scratch->node = desc_->node;
      // A sibling of a tracer is one too (zeros_like of it must follow
      // its shape under shapeless compile).
      scratch->is_tracer = desc_->is_tracer;
      node.outputs[i] = scratch;
      outs.push_back(array(std::move(scratch)));
    }
  }
  return outs;
}

std::vector<array> array::siblings() const {
  std::vector<array> sibs;
  if (!desc_->node || desc_->node->outputs.size() == 1) return sibs;
  for (auto& o : outputs()) {
    if (!o.is_same(*this)) sibs.push_back(o);
  }
  return sibs;
}

void array::set_data(allocator::Buffer buffer, Deleter d) {
  desc_->data = std::make_shared<Data>(buffer, std::move(d));
  desc_->data_ptr = buffer.ptr;
  desc_->data_size = size();
  desc_->strides = row_major_strides(shape());
  desc_->flags = row_major_flags(shape());
}

void array::set_data(allocator::Buffer buffer, size_t data_size,
                     Strides strides, Flags flags, Deleter d) {
  desc_->data = std::make_shared<Data>(buffer, std::move(d));
  desc_->data_ptr = buffer.ptr;
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
}

void array::set_device_data(detail::DeviceRecord* record, void* ptr,
                            size_t data_size, Strides strides, Flags flags) {
  desc_->data = std::make_shared<Data>(allocator::Buffer{ptr}, Deleter{});
  desc_->data->on_device = true;
  desc_->data->device = record;
  desc_->data_ptr = ptr;
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
}

detail::DeviceRecord* array::attach_device_record(
    detail::DeviceRecord* r) const {
  detail::DeviceRecord* expected = nullptr;
  if (desc_->data->device.compare_exchange_strong(expected, r)) return r;
  return expected;
}

void array::copy_shared_buffer(const array& other, const Strides& strides,
                               Flags flags, size_t data_size, int64_t offset) {
  desc_->data = other.desc_->data;
  desc_->data_ptr = static_cast<char*>(other.desc_->data_ptr) +
                    offset * static_cast<int64_t>(other.itemsize());
  desc_->strides = strides;
  desc_->flags = flags;
  desc_->data_size = data_size;
}

void array::copy_shared_buffer(const array& other) {
  copy_shared_buffer(other, other.strides(), other.flags(), other.data_size());
}

void array::move_shared_buffer(array other) {
  desc_->data = std::move(other.desc_->data);
  desc_->data_ptr = other.desc_->data_ptr;
  desc_->strides = other.desc_->strides;
  desc_->flags = other.desc_->flags;
  desc_->data_size = other.desc_->data_size;
}

allocator::Buffer array::buffer() const {
  return desc_->data ? desc_->data->buffer : allocator::Buffer{};
}

int64_t array::offset() const {
  if (!desc_->data) return 0;
  return static_cast<char*>(desc_->data_ptr) -
         static_cast<char*>(desc_->data->buffer.ptr);
}

void array::detach() {
  if (!desc_->node) return;
  auto node = std::move(desc_->node);
  for (auto& w : node->outputs) {
    if (auto d = w.lock()) d->node.reset();
  }
}

} // namespace kiln
