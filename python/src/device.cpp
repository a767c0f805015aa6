// Devices and streams.
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "kiln/core/profile.h"
#include "kiln_py.h"

namespace kiln::py {

namespace {

// Streams of ThreadLocalStream objects, per thread, by id.
thread_local std::unordered_map<int, Stream> thread_streams;
std::atomic<int> next_thread_local_id{0};
// Kept for MLX's API; there is no wired memory to limit here.
std::atomic<size_t> wired_limit{0};

std::string first_line_with(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      auto value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

template <typename T>
std::string to_str(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
} // namespace

Stream ThreadLocalStream::get() const {
  auto it = thread_streams.find(id);
  if (it == thread_streams.end()) {
    it = thread_streams.emplace(id, new_stream(device)).first;
  }
  return it->second;
}

void clear_thread_local_streams() { thread_streams.clear(); }

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
      [](const std::variant<Stream, ThreadLocalStream, Device>& s) {
        // A thread-local stream means this thread's stream for it.
        if (auto* t = std::get_if<ThreadLocalStream>(&s)) {
          return StreamContext{t->get(), {}, {}};
        }
        if (auto* st = std::get_if<Stream>(&s)) {
          return StreamContext{*st, {}, {}};
        }
        return StreamContext{std::get<Device>(s), {}, {}};
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
      [](const StreamArg& arg) {
        // A device stands for its default stream, as in MLX.
        StreamOrDevice sod = to_sod(arg);
        nb::gil_scoped_release release;
        if (std::holds_alternative<std::monostate>(sod)) {
          synchronize();
        } else {
          synchronize(to_stream(sod));
        }
      },
      "stream"_a = nb::none(), "Wait for the work queued on a stream.");
  m.def("_host_profile_reset", &detail::host_profile_reset,
        "With KILN_HOST_PROFILE set: forget the host times summed so far.");
  m.def(
      "device_count",
      [](Device::DeviceType t) {
        return t == Device::cpu ? 1 : (gpu::is_available() ? 1 : 0);
      },
      "device_type"_a, "Number of devices of a type.");

  nb::class_<ThreadLocalStream>(
      m, "ThreadLocalStream",
      "A stream that is unique per thread and runs operations on a device.")
      .def_ro("device", &ThreadLocalStream::device)
      .def("__repr__", [](const ThreadLocalStream& t) {
        return "ThreadLocalStream(" + to_str(t.device) + ")";
      });
  m.def(
      "new_thread_local_stream",
      [](const Device& d) {
        return ThreadLocalStream{d, next_thread_local_id.fetch_add(1)};
      },
      "device"_a, "A stream that each thread creates for itself on first use.");
  m.def(
      "new_thread_unsafe_stream", [](const Device& d) { return new_stream(d); },
      "device"_a,
      "A new stream that any thread may use (graphs still evaluate in "
      "sequence; races are the caller's to avoid).");
  m.def(
      "clear_streams", [] { clear_thread_local_streams(); },
      "Forget the streams the current thread created for thread-local "
      "streams (the next use makes new ones).");
  m.def(
      "device_info",
      [](std::optional<Device> d) {
        Device dev = d.value_or(default_device());
        nb::dict info;
        if (dev.type == Device::gpu) {
          if (!is_available(dev)) {
            throw nb::value_error(("[device_info] no GPU for " +
                                   to_str(dev) + " in this build.")
                                      .c_str());
          }
          gpu::Properties p = gpu::properties();
          info["architecture"] = p.architecture;
          info["device_name"] = p.name;
          info["total_memory"] = p.total_memory;
          info["multiprocessor_count"] = p.multiprocessors;
          return info;
        }
        utsname u{};
        uname(&u);
        info["architecture"] = std::string(u.machine);
        auto name = first_line_with("/proc/cpuinfo", "model name");
        info["device_name"] = name.empty() ? std::string(u.machine) : name;
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) {
          info["total_memory"] = static_cast<size_t>(pages) * page;
        }
        return info;
      },
      "d"_a = nb::none(),
      "Properties of a device: architecture, device_name, total_memory.");
  m.def(
      "set_wired_limit",
      [](int64_t limit) {
        if (limit < 0) {
          throw nb::value_error(("[set_wired_limit] the limit must be "
                                 "non-negative, got " +
                                 std::to_string(limit) + ".")
                                    .c_str());
        }
        return wired_limit.exchange(static_cast<size_t>(limit));
      },
      "limit"_a,
      "Set the wired memory limit; returns the previous one. Only Apple "
      "GPUs wire memory, so here the value is kept and has no effect.");
}

} // namespace kiln::py
