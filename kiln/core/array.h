// The array: a cheap handle to a shared descriptor that is either a lazy graph
// node (primitive + inputs) or evaluated data (buffer + layout), or both while
// a transformation traces it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kiln/config.h"
#include "kiln/core/allocator.h"
#include "kiln/core/dtype.h"

namespace kiln {

using Shape = std::vector<int32_t>;
using Strides = std::vector<int64_t>;

class Primitive;
class array;

namespace detail {
struct Event;
/** True while a transformation traces a function in this thread. */
bool in_tracing();
/** True while compile traces a shapeless function in this thread: ops then
 *  keep a shape taken from a traced array tied to it (broadcast_like). */
bool in_shapeless_tracing();
/** True while a shapeless compile traces a: its shape is the traced one
 *  only, and a replay may bring another, so ops that copy it into a node
 *  tie the node to a instead (broadcast_like, reshape_like). */
bool shape_follows_replay(const array& a);
/** The CUDA backend's record of a buffer's device side (defined there). */
struct DeviceRecord;
void release_device_record(DeviceRecord* r);
#if KILN_HAS_CUDA
/** Host pointer to a's data when its buffer lives on the GPU: waits for the
 *  GPU and copies the buffer to host memory once. */
void* host_view(const array& a);
#endif
} // namespace detail

using Deleter = std::function<void(allocator::Buffer)>;

class array {
 public:
  /** A 0-d array holding a scalar, optionally cast to dtype. Constrained to
   *  element types, so that overloads taking std::optional<array> next to
   *  other types (a Dtype, a Shape) resolve instead of failing to compile. */
  template <typename T>
    requires requires { TypeToDtype<T>::value; }
  explicit array(T val, Dtype dtype = default_dtype_of<T>);

  /** A 1-d array from a list; the dtype is the list's type unless given. */
  template <typename T>
  array(std::initializer_list<T> data);
  template <typename T>
  array(std::initializer_list<T> data, Dtype dtype);
  /** An array of the given shape from a list of shape-product values. */
  template <typename T>
  array(std::initializer_list<T> data, Shape shape,
        Dtype dtype = default_dtype_of<T>);
  /** An array from a vector holding shape-product values. */
  template <typename T>
  array(const std::vector<T>& data, Shape shape,
        Dtype dtype = default_dtype_of<T>);
  /** An array from any iterator over shape-product values. */
  template <typename It>
  array(It begin, Shape shape, Dtype dtype);

  /** Wraps an existing buffer; the deleter runs when the last user is gone. */
  array(allocator::Buffer data, Shape shape, Dtype dtype,
        Deleter deleter = allocator::free);

  /** A lazy node: out = primitive(inputs). */
  array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
        std::vector<array> inputs);

  /** The outputs of a multi-output primitive, siblings of one another. */
  static std::vector<array> make_arrays(
      std::vector<Shape> shapes, const std::vector<Dtype>& dtypes,
      const std::shared_ptr<Primitive>& primitive,
      const std::vector<array>& inputs);

  array(const array&) = default;
  array(array&&) = default;
  array& operator=(const array&) = default;
  array& operator=(array&&) = default;

  // --- Layout and type ---------------------------------------------------
  Dtype dtype() const { return desc_->dtype; }
  size_t itemsize() const { return dtype().size; }
  size_t size() const { return desc_->size; }
  size_t nbytes() const { return size() * itemsize(); }
  size_t ndim() const { return desc_->shape.size(); }
  const Shape& shape() const { return desc_->shape; }
  /** Size of one dimension; negative dims count from the end. */
  int shape(int dim) const;
  const Strides& strides() const { return desc_->strides; }
  int64_t strides(int dim) const;

  /** Layout facts, valid once the array is evaluated.
   *  contiguous: the elements with distinct indices along non-broadcast
   *    dimensions fill exactly data_size consecutive buffer slots, in some
   *    dimension order (transposed, column-major and broadcast arrays
   *    qualify). An elementwise kernel may then run over data_size slots.
   *  row_contiguous: strides are the row-major strides of shape.
   *  col_contiguous: strides are the column-major strides of shape. */
  struct Flags {
    bool contiguous : 1;
    bool row_contiguous : 1;
    bool col_contiguous : 1;
  };
  Flags flags() const { return desc_->flags; }
  /** Number of buffer elements the array's layout uses (1 for a broadcast
   *  scalar; size() for a dense array). */
  size_t data_size() const { return desc_->data_size; }

  // --- Evaluation and data -------------------------------------------------
  void eval();
  template <typename T>
  T item();
  /** Host pointer to the first element; for an array on the GPU this waits
   *  for it and reads it back (once per buffer). */
  template <typename T>
  T* data() {
    return static_cast<T*>(host_data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(host_data());
  }

  enum class Status { unscheduled, scheduled, available };
  Status status() const { return desc_->status; }
  bool is_available() const { return status() == Status::available; }
  /** Block until a pending async_eval has produced this array. */
  void wait();

  // --- Graph -------------------------------------------------------------
  bool has_primitive() const { return desc_->node != nullptr; }
  Primitive& primitive() const;
  const std::shared_ptr<Primitive>& primitive_ptr() const;
  const std::vector<array>& inputs() const;
  std::vector<array>& inputs();
  /** The other outputs of this array's primitive. */
  std::vector<array> siblings() const;
  /** All outputs of this array's primitive, this one included, in order. */
  std::vector<array> outputs() const;
  /** Position of this array among its primitive's outputs. */
  uint32_t position() const { return desc_->position; }
  /** Identity of the descriptor: equal for copies of one handle. */
  uintptr_t id() const { return reinterpret_cast<uintptr_t>(desc_.get()); }
  bool is_same(const array& o) const { return desc_ == o.desc_; }

  /** Marks arrays created while a transformation traces a function; only
   *  meaningful while tracing is in progress. */
  bool is_tracer() const { return desc_->is_tracer && detail::in_tracing(); }
  void set_tracer(bool t) { desc_->is_tracer = t; }

  // ======== Backend fence: only kernels and the evaluator call these ========
  /** An array with a shape and dtype but no data or graph yet (scratch
   *  space a kernel fills with set_data). */
  static array uninitialized(Shape shape, Dtype dtype);
  /** Allocate a fresh row-major buffer of size() elements. */
  void set_data(allocator::Buffer buffer, Deleter d = allocator::free);
  /** Set a buffer with a custom layout. */
  void set_data(allocator::Buffer buffer, size_t data_size, Strides strides,
                Flags flags, Deleter d = allocator::free);
  /** Share other's buffer with another layout, offset in elements. */
  void copy_shared_buffer(const array& other, const Strides& strides,
                          Flags flags, size_t data_size, int64_t offset = 0);
  /** Share other's buffer and layout. */
  void copy_shared_buffer(const array& other);
  /** Take other's buffer (donation), keeping other's layout. */
  void move_shared_buffer(array other);
  /** True when nothing else holds this array or its buffer, so a kernel may
   *  write its output into the buffer. */
  bool is_donatable() const {
    // A buffer with a GPU side is never written by a host kernel: its other
    // copy would go stale.
    return desc_.use_count() == 1 && desc_->data &&
           desc_->data.use_count() == 1 && desc_->data->device == nullptr;
  }
  /** The same for a GPU kernel: nothing else holds the array or its device
   *  buffer (the CUDA backend also checks which streams used it). */
  bool is_device_donatable() const {
    return desc_.use_count() == 1 && desc_->data &&
           desc_->data.use_count() == 1 && desc_->data->on_device;
  }
  allocator::Buffer buffer() const;
  /** Byte offset of data() from the start of the buffer. */
  int64_t offset() const;
  /** The first element in the buffer's own memory (device memory when the
   *  buffer is on the GPU); kernels of the owning backend use it. */
  void* raw_data_ptr() const { return desc_->data_ptr; }
  /** True when the buffer is device memory (the CUDA backend's). */
  bool on_device() const { return desc_->data && desc_->data->on_device; }
  /** A device buffer made by the CUDA backend, with its record. */
  void set_device_data(detail::DeviceRecord* record, void* ptr,
                       size_t data_size, Strides strides, Flags flags);
  /** The buffer's device record, or nullptr. */
  detail::DeviceRecord* device_record() const {
    return desc_->data ? desc_->data->device.load() : nullptr;
  }
  /** Attaches r to a buffer that has no record yet; returns the record that
   *  is attached afterwards (r, or one another thread attached first). */
  detail::DeviceRecord* attach_device_record(detail::DeviceRecord* r) const;
  /** Drop the primitive and inputs once evaluated (frees the graph). */
  void detach();
  void set_status(Status s) { desc_->status = s; }
  std::shared_ptr<detail::Event>& event() { return desc_->event; }

 private:
  struct Data {
    allocator::Buffer buffer;
    Deleter deleter;
    // Set by the CUDA backend: buffer.ptr is device memory (then the record
    // owns it), and the record of the buffer's copy on the other side.
    bool on_device = false;
    std::atomic<detail::DeviceRecord*> device{nullptr};
    Data(allocator::Buffer b, Deleter d) : buffer(b), deleter(std::move(d)) {}
    Data(const Data&) = delete;
    ~Data() {
      if (auto* r = device.load()) detail::release_device_record(r);
      if (deleter) deleter(buffer);
    }
  };

  void* host_data() const {
#if KILN_HAS_CUDA
    if (desc_->data && desc_->data->on_device) return detail::host_view(*this);
#endif
    return desc_->data_ptr;
  }

  struct ArrayDesc;
  // One per primitive application; its outputs point to it. Outputs are held
  // weakly so sibling arrays never form reference cycles.
  struct Node {
    std::shared_ptr<Primitive> primitive;
    std::vector<array> inputs;
    std::vector<std::weak_ptr<ArrayDesc>> outputs;
    // Each output's shape and dtype, to recreate one nobody holds any more
    // (outputs()); left empty by the one-output constructor: its output is
    // alive whenever anyone can reach the node.
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
  };

  struct ArrayDesc {
    Shape shape;
    Strides strides;
    size_t size;
    Dtype dtype;
    std::atomic<Status> status{Status::unscheduled};
    bool is_tracer = false;
    uint32_t position = 0;
    std::shared_ptr<Node> node;
    std::shared_ptr<detail::Event> event;

    std::shared_ptr<Data> data;
    void* data_ptr = nullptr;
    size_t data_size = 0;
    Flags flags{true, true, true};

    ArrayDesc(Shape shape, Dtype dtype);
    ~ArrayDesc();
  };

  explicit array(std::shared_ptr<ArrayDesc> desc) : desc_(std::move(desc)) {}
  void init_from_bytes(const void* src, size_t nbytes);
  template <typename It>
  void init(It begin);

  std::shared_ptr<ArrayDesc> desc_;
};

// ---------------------------------------------------------------------------

/** Row-major strides for a shape. */
Strides row_major_strides(const Shape& shape);
/** Number of elements of a shape; throws when it overflows. */
size_t shape_size(const Shape& shape);

template <typename T>
  requires requires { TypeToDtype<T>::value; }
array::array(T val, Dtype dtype)
    : desc_(std::make_shared<ArrayDesc>(Shape{}, dtype)) {
  init(&val);
}

template <typename T>
array::array(std::initializer_list<T> data)
    : desc_(std::make_shared<ArrayDesc>(
          Shape{static_cast<int32_t>(data.size())}, default_dtype_of<T>)) {
  init(data.begin());
}

template <typename T>
array::array(std::initializer_list<T> data, Dtype dtype)
    : desc_(std::make_shared<ArrayDesc>(
          Shape{static_cast<int32_t>(data.size())}, dtype)) {
  init(data.begin());
}

template <typename T>
array::array(std::initializer_list<T> data, Shape shape, Dtype dtype)
    : desc_(std::make_shared<ArrayDesc>(std::move(shape), dtype)) {
  if (data.size() != size()) {
    throw std::invalid_argument(
        "[array] data has " + std::to_string(data.size()) +
        " values but the shape needs " + std::to_string(size()) + ".");
  }
  init(data.begin());
}

template <typename T>
array::array(const std::vector<T>& data, Shape shape, Dtype dtype)
    : desc_(std::make_shared<ArrayDesc>(std::move(shape), dtype)) {
  if (data.size() != size()) {
    throw std::invalid_argument(
        "[array] data has " + std::to_string(data.size()) +
        " values but the shape needs " + std::to_string(size()) + ".");
  }
  init(data.begin());
}

template <typename It>
array::array(It begin, Shape shape, Dtype dtype)
    : desc_(std::make_shared<ArrayDesc>(std::move(shape), dtype)) {
  init(begin);
}

} // namespace kiln

#include "kiln/core/array_impl.h"
