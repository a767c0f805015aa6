// safetensors: an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and byte range, then the data. The header is
// written as MLX writes it (keys sorted, "__metadata__" null when empty).
#include <algorithm>
#include <stdexcept>

#include "kiln/io/common.h"
#include "kiln/io/io.h"
#include "kiln/io/json.h"
#include "kiln/ops/utils.h"

namespace kiln {

namespace {

using io::Reader;
using io::detail::corrupt;
using io::detail::Json;

constexpr const char* kMetadataKey = "__metadata__";
// Headers are small; a larger length means a corrupt or foreign file (the
// reference implementation uses the same limit).
constexpr uint64_t kMaxHeader = 100'000'000;

const std::pair<const char*, Dtype> kDtypeNames[] = {
    {"BOOL", bool_},  {"U8", uint8},     {"U16", uint16},    {"U32", uint32},
    {"U64", uint64},  {"I8", int8},      {"I16", int16},     {"I32", int32},
    {"I64", int64},   {"F16", float16},  {"BF16", bfloat16}, {"F32", float32},
    {"F64", float64}, {"C64", complex64},
    // float8 (e4m3) reads as its raw bytes, as MLX's: from_fp8 decodes.
    // Saving a uint8 array writes U8, the first name above.
    {"F8_E4M3", uint8}};

std::string name_of(Dtype d) {
  for (auto& [name, dtype] : kDtypeNames) {
    if (dtype == d) return name;
  }
  return "";
}

struct Entry {
  std::string name;
  Shape shape;
  Dtype dtype;
  uint64_t begin, end;
};

std::map<std::string, std::string> parse_metadata(const Json& v,
                                                  const Reader& in) {
  std::map<std::string, std::string> out;
  if (v.type == Json::Type::null) return out;
  if (v.type != Json::Type::object) {
    corrupt("load_safetensors", in, "\"__metadata__\" is not an object.");
  }
  for (auto& [k, s] : v.members) {
    if (s.type != Json::Type::string) {
      corrupt("load_safetensors", in,
              "metadata value of \"" + k + "\" is not a string.");
    }
    out[k] = s.text;
  }
  return out;
}

Entry parse_entry(const std::string& name, const Json& v, const Reader& in) {
  auto bad = [&](const std::string& why) -> Entry {
    corrupt("load_safetensors", in, "tensor '" + name + "' " + why);
  };
  if (v.type != Json::Type::object) bad("is not described by an object.");
  const Json* dt = v.find("dtype");
  const Json* shape = v.find("shape");
  const Json* offsets = v.find("data_offsets");
  if (!dt || dt->type != Json::Type::string) bad("has no dtype string.");
  if (!shape || shape->type != Json::Type::array) bad("has no shape list.");
  if (!offsets || offsets->type != Json::Type::array ||
      offsets->items.size() != 2) {
    bad("has no [begin, end] data_offsets.");
  }
  std::optional<Dtype> dtype;
  for (auto& [n, d] : kDtypeNames) {
    if (dt->text == n) dtype = d;
  }
  if (!dtype) bad("has unsupported dtype " + dt->text + ".");
  std::vector<uint64_t> dims;
  for (auto& d : shape->items) {
    auto u = d.as_uint();
    if (!u) bad("has a dimension that is not a non-negative integer.");
    dims.push_back(*u);
  }
  auto b = offsets->items[0].as_uint(), e = offsets->items[1].as_uint();
  if (!b || !e || *b > *e) bad("has invalid data_offsets.");
  Entry out{name,
            io::detail::checked_shape(dims, "load_safetensors", in,
                                      "tensor '" + name + "'"),
            *dtype, *b, *e};
  uint64_t nbytes = shape_size(out.shape) * uint64_t(dtype->size);
  if (*e - *b != nbytes) {
    bad("has data_offsets [" + std::to_string(*b) + ", " + std::to_string(*e) +
        "] for " + std::to_string(nbytes) + " bytes of " + dtype_name(*dtype) +
        " data of shape " + kiln::detail::shape_str(out.shape) + ".");
  }
  return out;
}

} // namespace

void save_safetensors(io::Writer& out,
                      const std::map<std::string, array>& arrays,
                      const std::map<std::string, std::string>& metadata) {
  using io::detail::json_quote;
  // Keys sorted, "__metadata__" among them, as MLX's JSON writer sorts.
  std::map<std::string, std::string> entries;
  std::string meta = "null";
  if (!metadata.empty()) {
    meta = "{";
    for (auto& [k, v] : metadata) {
      if (meta.size() > 1) meta += ",";
      meta += json_quote(k) + ":" + json_quote(v);
    }
    meta += "}";
  }
  entries[kMetadataKey] = meta;
  uint64_t offset = 0;
  for (auto& [name, a] : arrays) {
    if (name == kMetadataKey) {
      kiln::detail::invalid("save_safetensors",
                            "a tensor cannot be named \"__metadata__\".");
    }
    std::string shape = "[";
    for (size_t i = 0; i < a.ndim(); ++i) {
      if (i > 0) shape += ",";
      shape += std::to_string(a.shape()[i]);
    }
    shape += "]";
    uint64_t end = offset + a.nbytes();
    entries[name] = "{\"data_offsets\":[" + std::to_string(offset) + "," +
                    std::to_string(end) + "],\"dtype\":\"" +
                    name_of(a.dtype()) + "\",\"shape\":" + shape + "}";
    offset = end;
  }
  std::string header = "{";
  for (auto& [k, v] : entries) {
    if (header.size() > 1) header += ",";
    header += json_quote(k) + ":" + v;
  }
  header += "}";
  std::string len;
  io::detail::append_le<uint64_t>(len, header.size());
  out.write(len.data(), len.size());
  out.write(header.data(), header.size());
  for (auto& [name, a] : arrays) {
    array c = io::detail::row_major(a, "save_safetensors");
    out.write(c.data<char>(), c.nbytes());
  }
}

void save_safetensors(std::string file,
                      const std::map<std::string, array>& arrays,
                      const std::map<std::string, std::string>& metadata) {
  io::write_file(
      io::detail::with_suffix(std::move(file), ".safetensors"),
      [&](io::Writer& out) { save_safetensors(out, arrays, metadata); });
}

SafetensorsLoad load_safetensors(io::Reader& in, StreamOrDevice) {
  const std::string op = "load_safetensors";
  auto n = io::detail::read_le<uint64_t>(in, "the header length");
  auto left = in.remaining();
  if (n > kMaxHeader || (left && n > *left)) {
    corrupt(op, in,
            "invalid header length " + std::to_string(n) +
                " (not a safetensors file, or a truncated one).");
  }
  std::string text = in.read_string(n, "the JSON header");
  Json header;
  try {
    header = io::detail::parse_json(text);
  } catch (const std::invalid_argument& e) {
    corrupt(op, in, std::string("the header is not valid: ") + e.what());
  }
  if (header.type != Json::Type::object) {
    corrupt(op, in, "the header is not a JSON object.");
  }

  SafetensorsLoad result;
  std::vector<Entry> entries;
  for (auto& [name, v] : header.members) {
    if (name == kMetadataKey) {
      result.second = parse_metadata(v, in);
    } else {
      entries.push_back(parse_entry(name, v, in));
    }
  }
  // Read front to back so that no seeking is needed; ranges may leave gaps
  // but must not overlap.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  size_t data_start = in.position();
  for (auto& e : entries) {
    uint64_t at = in.position() - data_start;
    if (e.begin < at) {
      corrupt(op, in, "tensor '" + e.name + "' overlaps another tensor.");
    }
    left = in.remaining();
    if (left && e.end - at > *left) {
      corrupt(op, in,
              "tensor '" + e.name + "' has data_offsets [" +
                  std::to_string(e.begin) + ", " + std::to_string(e.end) +
                  "] past the end of the file (a truncated file?).");
    }
    in.skip(e.begin - at, "padding");
    result.first.insert_or_assign(
        e.name, io::detail::read_or_defer(in, e.shape, e.dtype, op,
                                          "tensor '" + e.name + "'"));
  }
  return result;
}

SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s) {
  io::FileReader in(file);
  return load_safetensors(in, s);
}

} // namespace kiln
