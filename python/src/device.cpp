// Devices and streams.
#include <sstream>

#include "kiln_py.h"

namespace kiln::py {

namespace {
template <typename T>
std::string to_str(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
} // namespace

void init_device(nb::module_& m) {
  nb::enum_<Device::DeviceType>(m, "DeviceType")
      .value("cpu", Device::DeviceType::cpu)
      .value("gpu", Device::DeviceType::gpu);
  m.attr("cpu") = m.attr("DeviceType").attr("cpu");
  m.attr("gpu") = m.attr("DeviceType").attr("gpu");

  nb::class_<Device>(m, "Device", "A device: the CPU or a GPU.")
      .def(nb::init<Device::DeviceType, int>(), "type"_a, "index"_a = 0)
      .def_ro("type", &Device::type)
      .def_ro("index", &Device::index)
      .def("__repr__", [](const Device& d) { return to_str(d); })
      .def("__eq__",
           [](const Device& a, nb::handle b) {
             if (nb::isinstance<Device>(b)) return a == nb::cast<Device>(b);
             if (nb::isinstance<Device::DeviceType>(b)) {
               return a.type == nb::cast<Device::DeviceType>(b);
             }
             return false;
           })
      .def("__hash__", [](const Device& d) {
        return static_cast<int>(d.type) * 1024 + d.index;
      });
  nb::implicitly_convertible<Device::DeviceType, Device>();

  nb::class_<Stream>(m, "Stream", "A queue of work on one device.")
      .def_ro("device", &Stream::device)
      .def_ro("index", &Stream::index)
      .def("__repr__", [](const Stream& s) { return to_str(s); })
      .def("__eq__", [](const Stream& a, nb::handle b) {
        return nb::isinstance<Stream>(b) && a == nb::cast<Stream>(b);
      });

  // `with kiln.core.stream(s):` makes s (or a device's default stream) the
  // default for the block and restores the previous default after it.
  struct StreamContext {
    std::variant<Stream, Device> target;
    std::optional<Device> prev_device;
    std::optional<Stream> prev_stream;
  };
  nb::class_<StreamContext>(m, "StreamContext")
      .def("__enter__",
           [](StreamContext& c) {
             c.prev_device = default_device();
             if (auto* st = std::get_if<Stream>(&c.target)) {
               c.prev_stream = default_stream(st->device);
               set_default_device(st->device);
               set_default_stream(*st);
             } else {
               set_default_device(std::get<Device>(c.target));
             }
           })
      .def("__exit__", [](StreamContext& c, nb::args) {
        if (c.prev_stream) set_default_stream(*c.prev_stream);
        if (c.prev_device) set_default_device(*c.prev_device);
      });
  m.def(
      "stream",
      [](const std::variant<Stream, Device>& s) {
        return StreamContext{s, {}, {}};
      },
      "s"_a, "A context manager making s the default stream or device.");

  m.def("default_device", &default_device, "The default device.");
  m.def("set_default_device", &set_default_device, "device"_a,
        "Set the default device.");
  m.def("default_stream", &default_stream, "device"_a,
        "The default stream of a device.");
  m.def("set_default_stream", &set_default_stream, "stream"_a,
        "Set the default stream of its device.");
  m.def("new_stream", &new_stream, "device"_a, "A new stream on a device.");
  m.def(
      "is_available", [](const Device& d) { return is_available(d); },
      "device"_a, "True when the device can run arrays.");
  m.def(
      "synchronize",
      [](std::optional<Stream> s) {
        nb::gil_scoped_release release;
        if (s) {
          synchronize(*s);
        } else {
          synchronize();
        }
      },
      "stream"_a = nb::none(), "Wait for the work queued on a stream.");
  m.def(
      "device_count",
      [](Device::DeviceType t) {
        return t == Device::cpu ? 1 : (gpu::is_available() ? 1 : 0);
      },
      "device_type"_a, "Number of devices of a type.");
}

} // namespace kiln::py
