// GGUF: a header (magic, version, counts), typed key-value metadata, tensor
// descriptions (name, dimensions innermost first, GGML type, offset), then
// the tensor data, each tensor aligned (32 bytes unless general.alignment
// says otherwise). Unquantized tensors load as they are; Q4_0, Q4_1 and Q8_0
// tensors load as MLX loads them, in kiln's affine quantization (groups of
// 32): NAME.weight packed in uint32, NAME.scales and NAME.biases float16.
#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "kiln/core/allocator.h"
#include "kiln/io/common.h"
#include "kiln/io/io.h"
#include "kiln/ops/utils.h"

namespace kiln {

namespace {

using io::Reader;
using io::detail::append_le;
using io::detail::corrupt;
using io::detail::read_le;

constexpr char kMagic[] = "GGUF";
constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlign = 32;
constexpr const char* kAlignKey = "general.alignment";
// A string longer than this in a header is junk, not a name.
constexpr uint64_t kMaxString = 1ull << 30;
constexpr uint32_t kMaxDims = 64;

// Metadata value types of the GGUF specification.
enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

const std::pair<ValueType, Dtype> kValueDtypes[] = {
    {kU8, uint8},   {kI8, int8},   {kU16, uint16},  {kI16, int16},
    {kU32, uint32}, {kI32, int32}, {kF32, float32}, {kBool, bool_},
    {kU64, uint64}, {kI64, int64}, {kF64, float64}};

// GGML tensor types without quantization.
const std::pair<uint32_t, Dtype> kTensorDtypes[] = {
    {0, float32}, {1, float16}, {24, int8},    {25, int16},
    {26, int32},  {27, int64},  {28, float64}, {30, bfloat16}};

std::optional<Dtype> value_dtype(uint32_t t) {
  for (auto& [v, d] : kValueDtypes) {
    if (v == t) return d;
  }
  return std::nullopt;
}

std::optional<uint32_t> value_type(Dtype d) {
  for (auto& [v, dt] : kValueDtypes) {
    if (dt == d) return v;
  }
  return std::nullopt;
}

std::optional<uint32_t> tensor_type(Dtype d) {
  for (auto& [t, dt] : kTensorDtypes) {
    if (dt == d) return t;
  }
  return std::nullopt;
}

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// --- writing ---------------------------------------------------------------

void put_string(std::string& out, const std::string& s) {
  append_le<uint64_t>(out, s.size());
  out += s;
}

void put_value(std::string& out, const std::string& key,
               const GGUFMetaData& value) {
  if (auto* s = std::get_if<std::string>(&value)) {
    append_le<uint32_t>(out, kString);
    put_string(out, *s);
  } else if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
    append_le<uint32_t>(out, kArray);
    append_le<uint32_t>(out, kString);
    append_le<uint64_t>(out, list->size());
    for (auto& s : *list) put_string(out, s);
  } else {
    const array& a = std::get<array>(value);
    auto t = value_type(a.dtype());
    if (!t) {
      kiln::detail::invalid(
          "save_gguf", "metadata '" + key + "' is a " +
                           kiln::detail::describe(a) +
                           "; GGUF metadata holds bool, integer, float32 and "
                           "float64 values.");
    }
    if (a.ndim() > 1) {
      kiln::detail::invalid("save_gguf",
                            "metadata '" + key + "' is a " +
                                kiln::detail::describe(a) +
                                "; only scalars and 1-d arrays can be saved.");
    }
    array c = io::detail::row_major(a, "save_gguf");
    if (c.ndim() == 1) {
      append_le<uint32_t>(out, kArray);
      append_le<uint32_t>(out, *t);
      append_le<uint64_t>(out, c.size());
    } else {
      append_le<uint32_t>(out, *t);
    }
    out.append(c.data<char>(), c.nbytes());
  }
}

// --- reading ---------------------------------------------------------------

std::string get_string(Reader& in, const std::string& what) {
  auto n = read_le<uint64_t>(in, what);
  auto left = in.remaining();
  if (n > kMaxString || (left && n > *left)) {
    corrupt("load_gguf", in,
            what + " has length " + std::to_string(n) +
                ", past the end of the file.");
  }
  return in.read_string(n, what);
}

GGUFMetaData get_value(Reader& in, const std::string& key) {
  std::string what = "metadata '" + key + "'";
  auto type = read_le<uint32_t>(in, what);
  if (type == kString) return get_string(in, what);
  if (type == kArray) {
    auto elem = read_le<uint32_t>(in, what);
    auto count = read_le<uint64_t>(in, what);
    if (elem == kString) {
      // Each string takes at least its 8-byte length.
      auto left = in.remaining();
      if (left && count > *left / 8) {
        corrupt("load_gguf", in,
                what + " has " + std::to_string(count) +
                    " strings, more than the file holds.");
      }
      std::vector<std::string> list;
      for (uint64_t i = 0; i < count; ++i) list.push_back(get_string(in, what));
      return list;
    }
    auto dtype = value_dtype(elem);
    if (!dtype) {
      corrupt("load_gguf", in,
              what + " is an array of value type " + std::to_string(elem) +
                  ", which kiln does not read (nested arrays or an "
                  "unknown type).");
    }
    Shape shape = io::detail::checked_shape({count}, "load_gguf", in, what);
    return io::detail::read_array(in, shape, *dtype, "load_gguf", what);
  }
  auto dtype = value_dtype(type);
  if (!dtype) {
    corrupt("load_gguf", in,
            what + " has unknown value type " + std::to_string(type) + ".");
  }
  return io::detail::read_array(in, {}, *dtype, "load_gguf", what);
}

// The GGML block formats read as affine quantization: 32 weights a block
// behind a float16 scale (and, for Q4_1, a float16 minimum).
enum QuantType : uint32_t { kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8 };
constexpr int64_t kBlock = 32;

struct TensorInfo {
  std::string name;
  Shape shape;
  Dtype dtype;
  uint64_t offset;
  uint32_t quant = 0; // a QuantType, or 0 for an unquantized tensor
};

int64_t block_bytes(uint32_t quant) {
  return quant == kQ4_0 ? 18 : quant == kQ4_1 ? 20 : 34;
}

std::string ggml_type_name(uint32_t t) {
  static const char* names[] = {
      "F32",   "F16",   "Q4_0",    "Q4_1",   "Q4_2",    "Q4_3",  "Q5_0",
      "Q5_1",  "Q8_0",  "Q8_1",    "Q2_K",   "Q3_K",    "Q4_K",  "Q5_K",
      "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
      "IQ3_S", "IQ2_S", "IQ4_XS",  "I8",     "I16",     "I32",   "I64",
      "F64",   "IQ1_M", "BF16"};
  if (t < sizeof(names) / sizeof(names[0])) return names[t];
  return "unknown type " + std::to_string(t);
}

TensorInfo get_tensor_info(Reader& in) {
  TensorInfo info{get_string(in, "a tensor name"), {}, float32, 0};
  std::string what = "tensor '" + info.name + "'";
  auto ndim = read_le<uint32_t>(in, what);
  if (ndim > kMaxDims) {
    corrupt("load_gguf", in,
            what + " has " + std::to_string(ndim) + " dimensions.");
  }
  std::vector<uint64_t> dims(ndim);
  for (auto& d : dims) d = read_le<uint64_t>(in, what);
  // GGUF lists dimensions innermost first.
  std::reverse(dims.begin(), dims.end());
  info.shape = io::detail::checked_shape(dims, "load_gguf", in, what);
  auto type = read_le<uint32_t>(in, what);
  if (type == kQ4_0 || type == kQ4_1 || type == kQ8_0) {
    if (info.shape.empty() || info.shape.back() % kBlock != 0) {
      corrupt("load_gguf", in,
              what + " is " + ggml_type_name(type) + " with shape " +
                  kiln::detail::shape_str(info.shape) +
                  ": its last dimension must be a multiple of 32.");
    }
    info.quant = type;
    info.offset = read_le<uint64_t>(in, what);
    return info;
  }
  bool found = false;
  for (auto& [t, d] : kTensorDtypes) {
    if (t == type) {
      info.dtype = d;
      found = true;
    }
  }
  if (!found) {
    corrupt("load_gguf", in,
            what + " has GGML type " + ggml_type_name(type) +
                "; kiln reads F32, F16, BF16, F64, I8, I16, I32, I64, "
                "Q4_0, Q4_1 and Q8_0.");
  }
  info.offset = read_le<uint64_t>(in, what);
  return info;
}

uint16_t le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// One quantized tensor as MLX's load gives it: the blocks' codes packed in
// uint32 (8 four-bit or 4 eight-bit codes a word, the first in the lowest
// bits), and per block a scale and a bias with w = scale * code + bias.
void read_quantized(Reader& in, const TensorInfo& t,
                    std::map<std::string, array>& out) {
  const std::string what = "tensor '" + t.name + "'";
  int64_t blocks = 1;
  for (int d : t.shape) blocks *= d;
  blocks /= kBlock;
  // One row of bytes per block: the shape stays within 32-bit dimensions.
  Shape raw_shape = io::detail::checked_shape(
      {static_cast<uint64_t>(blocks),
       static_cast<uint64_t>(block_bytes(t.quant))},
      "load_gguf", in, what);
  array raw = io::detail::read_array(in, raw_shape, uint8, "load_gguf", what);
  int bits = t.quant == kQ8_0 ? 8 : 4;
  Shape wshape = t.shape, sshape = t.shape;
  // In 64 bits: the product passes int32 for rows past 2^28 values, the
  // quotient never does (bits <= 32).
  wshape.back() =
      static_cast<int32_t>(static_cast<int64_t>(t.shape.back()) * bits / 32);
  sshape.back() = t.shape.back() / kBlock;
  size_t groups = static_cast<size_t>(blocks);
  array weight(allocator::malloc(groups * kBlock * bits / 8), wshape, uint32);
  array scales(allocator::malloc(groups * 2), sshape, float16);
  array biases(allocator::malloc(groups * 2), sshape, float16);
  const uint8_t* src = raw.data<uint8_t>();
  auto* codes = reinterpret_cast<uint8_t*>(weight.data<uint32_t>());
  auto* sc = scales.data<float16_t>();
  auto* bi = biases.data<float16_t>();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = src + b * block_bytes(t.quant);
    float16_t scale(le16(blk), kiln::detail::from_bits);
    sc[b] = scale;
    uint8_t* dst = codes + b * (kBlock * bits / 8);
    if (t.quant == kQ8_0) {
      // int8 codes q become q + 128, so the bias is -128 * scale.
      for (int j = 0; j < kBlock; ++j) dst[j] = blk[2 + j] ^ 0x80;
      bi[b] = float16_t(-128.0f * static_cast<float>(scale));
      continue;
    }
    // Byte j of a block holds code j in its low half and code j + 16 in
    // its high half; kiln packs codes 2i and 2i + 1 into byte i.
    const uint8_t* q = blk + (t.quant == kQ4_1 ? 4 : 2);
    for (int j = 0; j < 16; j += 2) {
      dst[j / 2] = (q[j] & 0x0F) | ((q[j + 1] & 0x0F) << 4);
      dst[8 + j / 2] = (q[j] >> 4) | (q[j + 1] & 0xF0);
    }
    bi[b] = t.quant == kQ4_1
                ? float16_t(le16(blk + 2), kiln::detail::from_bits)
                : float16_t(-8.0f * static_cast<float>(scale));
  }
  std::string prefix = t.name;
  constexpr std::string_view suffix = ".weight";
  if (prefix.size() > suffix.size() &&
      prefix.compare(prefix.size() - suffix.size(), suffix.size(), suffix) ==
          0) {
    prefix.resize(prefix.size() - suffix.size());
  }
  for (auto& [name, a] : {std::pair{t.name, weight},
                          std::pair{prefix + ".scales", scales},
                          std::pair{prefix + ".biases", biases}}) {
    if (!out.emplace(name, a).second) {
      corrupt("load_gguf", in,
              "quantized " + what + " gives '" + name +
                  "', which another tensor of the file has.");
    }
  }
}

uint64_t alignment_of(const GGUFMetaData& value) {
  auto* a = std::get_if<array>(&value);
  if (!a || a->dtype() != uint32 || a->ndim() != 0) return 0;
  array c = io::detail::row_major(*a, "save_gguf");
  uint32_t v = *c.data<uint32_t>();
  return v != 0 && (v & (v - 1)) == 0 ? v : 0;
}

} // namespace

void save_gguf(io::Writer& out, const std::map<std::string, array>& arrays,
               const std::map<std::string, GGUFMetaData>& metadata) {
  // The data is laid out with the alignment the file declares.
  uint64_t align = kDefaultAlign;
  if (auto it = metadata.find(kAlignKey); it != metadata.end()) {
    align = alignment_of(it->second);
    if (align == 0) {
      kiln::detail::invalid("save_gguf",
                            "general.alignment must be a uint32 scalar "
                            "that is a power of two.");
    }
  }
  for (auto& [name, a] : arrays) {
    if (!tensor_type(a.dtype())) {
      kiln::detail::invalid(
          "save_gguf", "tensor '" + name + "' is a " +
                           kiln::detail::describe(a) +
                           "; GGUF tensors are float32, float16, bfloat16, "
                           "float64, int8, int16, int32 or int64.");
    }
  }
  std::string head(kMagic, 4);
  append_le<uint32_t>(head, kVersion);
  append_le<uint64_t>(head, arrays.size());
  append_le<uint64_t>(head, metadata.size());
  for (auto& [key, value] : metadata) {
    put_string(head, key);
    put_value(head, key, value);
  }
  uint64_t offset = 0;
  for (auto& [name, a] : arrays) {
    put_string(head, name);
    append_le<uint32_t>(head, a.ndim());
    for (int i = int(a.ndim()) - 1; i >= 0; --i) {
      append_le<uint64_t>(head, a.shape()[i]);
    }
    append_le<uint32_t>(head, *tensor_type(a.dtype()));
    append_le<uint64_t>(head, offset);
    offset = align_up(offset + a.nbytes(), align);
  }
  head.append(align_up(head.size(), align) - head.size(), '\0');
  out.write(head.data(), head.size());
  const std::string zeros(align, '\0');
  for (auto& [name, a] : arrays) {
    array c = io::detail::row_major(a, "save_gguf");
    out.write(c.data<char>(), c.nbytes());
    out.write(zeros.data(), align_up(c.nbytes(), align) - c.nbytes());
  }
}

void save_gguf(std::string file, const std::map<std::string, array>& arrays,
               const std::map<std::string, GGUFMetaData>& metadata) {
  io::write_file(io::detail::with_suffix(std::move(file), ".gguf"),
                 [&](io::Writer& out) { save_gguf(out, arrays, metadata); });
}

GGUFLoad load_gguf(io::Reader& in, StreamOrDevice) {
  const std::string op = "load_gguf";
  char magic[4];
  in.read(magic, 4, "the GGUF magic");
  if (std::memcmp(magic, kMagic, 4) != 0) {
    corrupt(op, in, "not a GGUF file (the magic is missing).");
  }
  auto version = read_le<uint32_t>(in, "the version");
  if (version != 2 && version != 3) {
    corrupt(op, in,
            "unsupported GGUF version " + std::to_string(version) +
                " (kiln reads little-endian versions 2 and 3).");
  }
  auto n_tensors = read_le<uint64_t>(in, "the tensor count");
  auto n_values = read_le<uint64_t>(in, "the metadata count");
  // A metadata entry takes at least 13 bytes and a tensor description 24.
  auto left = in.remaining();
  if (left && (n_values > *left / 13 || n_tensors > *left / 24)) {
    corrupt(op, in,
            "the header announces " + std::to_string(n_tensors) +
                " tensors and " + std::to_string(n_values) +
                " metadata entries, more than the file holds.");
  }

  GGUFLoad result;
  uint64_t alignment = kDefaultAlign;
  for (uint64_t i = 0; i < n_values; ++i) {
    std::string key = get_string(in, "a metadata key");
    GGUFMetaData value = get_value(in, key);
    if (key == kAlignKey) {
      auto* a = std::get_if<array>(&value);
      if (!a || a->dtype() != uint32 || a->ndim() != 0 ||
          *a->data<uint32_t>() == 0 ||
          (*a->data<uint32_t>() & (*a->data<uint32_t>() - 1)) != 0) {
        corrupt(op, in, "general.alignment is not a power of two (uint32).");
      }
      alignment = *a->data<uint32_t>();
    }
    if (!result.second.emplace(key, std::move(value)).second) {
      corrupt(op, in, "metadata key '" + key + "' appears twice.");
    }
  }
  std::vector<TensorInfo> infos;
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    infos.push_back(get_tensor_info(in));
    if (!names.insert(infos.back().name).second) {
      corrupt(op, in, "tensor '" + infos.back().name + "' appears twice.");
    }
  }

  in.skip(align_up(in.position(), alignment) - in.position(), "padding");
  std::sort(infos.begin(), infos.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return a.offset < b.offset;
            });
  size_t data_start = in.position();
  for (auto& t : infos) {
    uint64_t at = in.position() - data_start;
    if (t.offset < at) {
      corrupt(op, in, "tensor '" + t.name + "' overlaps another tensor.");
    }
    left = in.remaining();
    if (left && t.offset - at > *left) {
      corrupt(op, in,
              "tensor '" + t.name + "' has offset " + std::to_string(t.offset) +
                  " past the end of the file (a truncated file?).");
    }
    in.skip(t.offset - at, "padding");
    if (t.quant) {
      read_quantized(in, t, result.first);
      continue;
    }
    array a = io::detail::read_or_defer(in, t.shape, t.dtype, op,
                                        "tensor '" + t.name + "'");
    if (!result.first.emplace(t.name, std::move(a)).second) {
      corrupt(op, in,
              "tensor '" + t.name + "' has the name of a quantized tensor's "
              "scales or biases.");
    }
  }
  return result;
}

GGUFLoad load_gguf(const std::string& file, StreamOrDevice s) {
  io::FileReader in(file);
  return load_gguf(in, s);
}

} // namespace kiln
