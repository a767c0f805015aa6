// Saving and loading: .npy, safetensors and GGUF through the C++ readers
// and writers, to paths or to Python file objects. load, savez and
// savez_compressed are Python (kiln/_io.py): .npz is a zip of .npy files.
#include "kiln/io/common.h"
#include "kiln/io/io.h"

#include <sys/stat.h>

#include <map>

#include "kiln_py.h"

namespace kiln::py {

namespace {

/** file's path when it is a str or os.PathLike; nullopt otherwise. */
std::optional<std::string> as_path(nb::handle file) {
  if (nb::isinstance<nb::str>(file)) return nb::cast<std::string>(file);
  if (nb::hasattr(file, "__fspath__")) {
    return nb::cast<std::string>(
        nb::module_::import_("os").attr("fsdecode")(file));
  }
  return std::nullopt;
}

// Bytes moved per call into a Python file object.
constexpr size_t kChunk = size_t(16) << 20;

std::string label_of(nb::handle file) {
  if (nb::hasattr(file, "name")) {
    nb::object name = file.attr("name");
    if (nb::isinstance<nb::str>(name)) return nb::cast<std::string>(name);
  }
  return "<" + py_type_name(file) + ">";
}

// The C++ side runs without the GIL; each call into the Python object takes
// it back.
class PyReader : public io::Reader {
 public:
  explicit PyReader(nb::handle file)
      : file_(nb::borrow(file)), label_(label_of(file)) {
    // A file on disk tells its size, so corrupt headers are caught before
    // a large allocation; other streams are read until they end. Wrappers
    // such as gzip also have a fileno, of the compressed file: only plain
    // file objects are asked.
    nb::module_ pyio = nb::module_::import_("io");
    if (!nb::isinstance(file, pyio.attr("BufferedReader")) &&
        !nb::isinstance(file, pyio.attr("BufferedRandom")) &&
        !nb::isinstance(file, pyio.attr("FileIO"))) {
      return;
    }
    try {
      int fd = nb::cast<int>(file_.attr("fileno")());
      struct stat st;
      size_t pos = nb::cast<size_t>(file_.attr("tell")());
      if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
          size_t(st.st_size) >= pos) {
        size_ = size_t(st.st_size) - pos;
      }
    } catch (const nb::python_error&) {
    } catch (const nb::cast_error&) {
    }
  }
  ~PyReader() override {
    nb::gil_scoped_acquire gil;
    file_.reset();
  }
  std::string label() const override { return label_; }

 protected:
  size_t read_some(void* dst, size_t n) override {
    nb::gil_scoped_acquire gil;
    // Bytes are copied out of what read() returns: handing Python a view
    // of kiln's buffer would let an object keep it past the buffer's life.
    nb::object got = file_.attr("read")(std::min(n, kChunk));
    if (got.is_none()) return 0;
    if (!nb::isinstance<nb::bytes>(got)) {
      throw nb::type_error(("[load] " + label_ +
                            " must be opened in binary mode (read returned " +
                            py_type_name(got) + ").")
                               .c_str());
    }
    auto b = nb::borrow<nb::bytes>(got);
    size_t k = std::min(n, b.size());
    std::memcpy(dst, b.c_str(), k);
    return k;
  }
  std::optional<size_t> size() const override { return size_; }

 private:
  nb::object file_;
  std::string label_;
  std::optional<size_t> size_;
};

class PyWriter : public io::Writer {
 public:
  explicit PyWriter(nb::handle file)
      : file_(nb::borrow(file)), label_(label_of(file)) {}
  ~PyWriter() override {
    nb::gil_scoped_acquire gil;
    file_.reset();
  }
  std::string label() const override { return label_; }
  void write(const void* src, size_t n) override {
    nb::gil_scoped_acquire gil;
    // Copies in chunks, for the reason given in PyReader.
    auto* p = static_cast<const char*>(src);
    while (n > 0) {
      size_t k = std::min(n, kChunk);
      nb::object wrote = file_.attr("write")(nb::bytes(p, k));
      // Raw streams may write less than asked; None means all of it.
      size_t done = wrote.is_none() ? k : std::min(k, nb::cast<size_t>(wrote));
      if (done == 0) {
        throw std::runtime_error("[save] writing to " + label_ + " failed.");
      }
      p += done;
      n -= done;
    }
  }

 private:
  nb::object file_;
  std::string label_;
};

/** Runs f with a writer for file (a path with suffix appended, or a file
 *  object), without the GIL. */
template <typename F>
void with_writer(nb::handle file, const char* op, const std::string& suffix,
                 F&& f) {
  if (auto path = as_path(file)) {
    std::string full = io::detail::with_suffix(*path, suffix);
    nb::gil_scoped_release release;
    io::write_file(full, f);
  } else if (nb::hasattr(file, "write")) {
    PyWriter out(file);
    nb::gil_scoped_release release;
    f(out);
  } else {
    throw nb::value_error((std::string("[") + op +
                           "] file must be a str, a pathlib.Path or a "
                           "file-like object with write(); got " +
                           py_type_name(file) + ".")
                              .c_str());
  }
}

template <typename F>
auto with_reader(nb::handle file, const char* op, F&& f) {
  if (auto path = as_path(file)) {
    nb::gil_scoped_release release;
    io::FileReader in(*path);
    return f(in);
  }
  if (!nb::hasattr(file, "read")) {
    throw nb::value_error((std::string("[") + op +
                           "] file must be a str, a pathlib.Path or a "
                           "file-like object opened in binary mode; got " +
                           py_type_name(file) + ".")
                              .c_str());
  }
  // Text streams (which have an encoding) would decode the bytes.
  nb::object text_io = nb::module_::import_("io").attr("TextIOBase");
  if (nb::isinstance(file, text_io)) {
    throw nb::type_error((std::string("[") + op + "] " + label_of(file) +
                          " must be opened in binary mode.")
                             .c_str());
  }
  PyReader in(file);
  nb::gil_scoped_release release;
  return f(in);
}

std::map<std::string, array> to_array_map(nb::handle arrays, const char* op) {
  if (!nb::isinstance<nb::dict>(arrays)) {
    throw nb::type_error((std::string("[") + op +
                          "] arrays must be a dict of str to array; got " +
                          py_type_name(arrays) + ".")
                             .c_str());
  }
  std::map<std::string, array> out;
  for (auto [k, v] : nb::borrow<nb::dict>(arrays)) {
    if (!nb::isinstance<nb::str>(k)) {
      throw nb::type_error((std::string("[") + op +
                            "] array names must be str; got " +
                            py_type_name(k) + ".")
                               .c_str());
    }
    if (!nb::isinstance<array>(v)) {
      throw nb::type_error((std::string("[") + op + "] '" +
                            nb::cast<std::string>(k) +
                            "' must be an array; got " + py_type_name(v) + ".")
                               .c_str());
    }
    out.insert_or_assign(nb::cast<std::string>(k), nb::cast<array>(v));
  }
  return out;
}

std::map<std::string, std::string> to_string_map(nb::handle metadata) {
  std::map<std::string, std::string> out;
  if (metadata.is_none()) return out;
  auto bad = [] {
    return nb::value_error(
        "[save_safetensors] metadata must be a dict with str keys and str "
        "values.");
  };
  if (!nb::isinstance<nb::dict>(metadata)) throw bad();
  for (auto [k, v] : nb::borrow<nb::dict>(metadata)) {
    if (!nb::isinstance<nb::str>(k) || !nb::isinstance<nb::str>(v)) {
      throw bad();
    }
    out[nb::cast<std::string>(k)] = nb::cast<std::string>(v);
  }
  return out;
}

GGUFMetaData to_gguf_value(const std::string& key, nb::handle v) {
  if (nb::isinstance<array>(v)) return nb::cast<array>(v);
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    std::vector<std::string> out;
    bool all_str = true;
    for (nb::handle s : v) {
      if (!nb::isinstance<nb::str>(s))
        all_str = false;
      else
        out.push_back(nb::cast<std::string>(s));
    }
    if (all_str) return out;
  }
  throw nb::type_error(("[save_gguf] metadata '" + key +
                        "' must be an array, a str or a list of str; got " +
                        py_type_name(v) + ".")
                           .c_str());
}

nb::object from_gguf_value(const GGUFMetaData& v) {
  if (auto* s = std::get_if<std::string>(&v))
    return nb::str(s->c_str(), s->size());
  if (auto* l = std::get_if<std::vector<std::string>>(&v)) {
    nb::list out;
    for (auto& s : *l) out.append(nb::str(s.c_str(), s.size()));
    return out;
  }
  return nb::cast(std::get<array>(v));
}

nb::dict to_dict(const std::map<std::string, array>& arrays) {
  nb::dict out;
  for (auto& [k, a] : arrays) out[nb::str(k.c_str(), k.size())] = nb::cast(a);
  return out;
}

} // namespace

void init_io(nb::module_& m) {
  m.def(
      "save",
      [](nb::handle file, const array& a) {
        with_writer(file, "save", ".npy", [&](io::Writer& w) { save(w, a); });
      },
      "file"_a, "arr"_a,
      nb::sig("def save(file: file | str | pathlib.Path, arr: array) -> None"),
      "Save the array to a binary file in .npy format (\".npy\" is appended "
      "to a path that lacks it).");
  m.def(
      "save_safetensors",
      [](nb::handle file, nb::handle arrays, nb::handle metadata) {
        auto map = to_array_map(arrays, "save_safetensors");
        auto meta = to_string_map(metadata);
        with_writer(file, "save_safetensors", ".safetensors",
                    [&](io::Writer& w) { save_safetensors(w, map, meta); });
      },
      "file"_a, "arrays"_a, "metadata"_a = nb::none(),
      nb::sig("def save_safetensors(file: file | str | pathlib.Path, "
              "arrays: dict[str, array], metadata: dict[str, str] | None = "
              "None) -> None"),
      "Save arrays to a binary file in .safetensors format, with optional "
      "string metadata.");
  m.def(
      "save_gguf",
      [](nb::handle file, nb::handle arrays, nb::handle metadata) {
        auto map = to_array_map(arrays, "save_gguf");
        std::map<std::string, GGUFMetaData> meta;
        if (!metadata.is_none()) {
          if (!nb::isinstance<nb::dict>(metadata)) {
            throw nb::type_error("[save_gguf] metadata must be a dict.");
          }
          for (auto [k, v] : nb::borrow<nb::dict>(metadata)) {
            if (!nb::isinstance<nb::str>(k)) {
              throw nb::type_error("[save_gguf] metadata keys must be str.");
            }
            auto key = nb::cast<std::string>(k);
            meta.insert_or_assign(key, to_gguf_value(key, v));
          }
        }
        // As MLX, GGUF goes to paths only.
        if (!as_path(file)) {
          throw nb::value_error(
              "[save_gguf] file must be a str or a pathlib.Path.");
        }
        with_writer(file, "save_gguf", ".gguf",
                    [&](io::Writer& w) { save_gguf(w, map, meta); });
      },
      "file"_a, "arrays"_a, "metadata"_a = nb::none(),
      nb::sig("def save_gguf(file: str | pathlib.Path, arrays: dict[str, "
              "array], metadata: dict[str, array | str | list[str]] | None = "
              "None) -> None"),
      "Save arrays to a binary file in .gguf format. Metadata values are "
      "scalar or 1-d arrays, str, or lists of str.");

  // The readers behind kiln.core.load; file is a path or a file object.
  m.def(
      "_load_npy",
      [](nb::handle file, const StreamArg& s) {
        auto sod = to_sod(s);
        return with_reader(file, "load",
                           [&](io::Reader& r) { return load(r, sod); });
      },
      "file"_a, "stream"_a = nb::none());
  m.def(
      "_load_safetensors",
      [](nb::handle file, const StreamArg& s) {
        auto sod = to_sod(s);
        auto [arrays, meta] = with_reader(file, "load", [&](io::Reader& r) {
          return load_safetensors(r, sod);
        });
        nb::dict md;
        for (auto& [k, v] : meta) {
          md[nb::str(k.c_str(), k.size())] = nb::str(v.c_str(), v.size());
        }
        return nb::make_tuple(to_dict(arrays), md);
      },
      "file"_a, "stream"_a = nb::none());
  m.def(
      "_load_gguf",
      [](nb::handle file, const StreamArg& s) {
        auto sod = to_sod(s);
        auto [arrays, meta] = with_reader(
            file, "load", [&](io::Reader& r) { return load_gguf(r, sod); });
        nb::dict md;
        for (auto& [k, v] : meta) {
          md[nb::str(k.c_str(), k.size())] = from_gguf_value(v);
        }
        return nb::make_tuple(to_dict(arrays), md);
      },
      "file"_a, "stream"_a = nb::none());
}

} // namespace kiln::py
