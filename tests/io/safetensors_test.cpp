// safetensors: round trips with metadata, the header as MLX writes it,
// files from other writers (padding, gaps, any key order), and errors.
#include "io/io_helpers.h"

namespace kiln::test {
namespace {

std::string st_file(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += char((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

class Safetensors : public IoTest {};

TEST_F(Safetensors, RoundTripEveryDtypeAndLayoutWithMetadata) {
  std::map<std::string, array> arrays;
  std::map<std::string, array> originals;
  for (Dtype dtype : every_dtype()) {
    for (auto& [layout, a] : layouts(dtype)) {
      arrays.insert_or_assign(dtype_name(dtype) + "." + layout, a);
    }
  }
  std::map<std::string, std::string> meta = {
      {"format", "mlx"},
      {"quote\"back\\slash", "tab\tnewline\n\x01"},
      {"unicode", "\xc3\xa9t\xc3\xa9"},
      {"empty", ""}};
  save_safetensors(path("all"), arrays, meta);
  auto [loaded, loaded_meta] = load_safetensors(path("all.safetensors"));
  EXPECT_EQ(loaded_meta, meta);
  ASSERT_EQ(loaded.size(), arrays.size());
  for (auto& [name, a] : arrays) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(loaded.count(name));
    EXPECT_TRUE(same_array(loaded.at(name), a));
  }
}

TEST_F(Safetensors, HeaderIsWhatMLXWrites) {
  // Keys sorted, no spaces, "__metadata__" null without metadata, data in
  // key order right after the header.
  auto b = array({1.0f, 2.0f});
  auto a = zeros({2, 3}, int16);
  save_safetensors(path("h.safetensors"), {{"b", b}, {"a", a}});
  std::string header =
      "{\"__metadata__\":null,\"a\":{\"data_offsets\":[0,12],\"dtype\":"
      "\"I16\",\"shape\":[2,3]},\"b\":{\"data_offsets\":[12,20],\"dtype\":"
      "\"F32\",\"shape\":[2]}}";
  EXPECT_EQ(read_file(path("h.safetensors")),
            st_file(header, strided_bytes(a) + strided_bytes(b)));
  save_safetensors(path("m.safetensors"), {}, {{"k", "v"}});
  EXPECT_EQ(read_file(path("m.safetensors")),
            st_file("{\"__metadata__\":{\"k\":\"v\"}}", ""));
}

TEST_F(Safetensors, ReadsOtherWritersLayouts) {
  // Keys in any order, spaces, header padding, a gap between tensors, data
  // stored out of key order, an escaped name, scalar and empty tensors.
  std::string header =
      " { \"z\" : {\"dtype\":\"F64\", \"shape\":[], \"data_offsets\":[0,8]},"
      " \"__metadata__\": {\"a\": \"b\"},"
      " \"e\\u00e9\" : {\"shape\":[0,2],\"dtype\":\"BF16\","
      "\"data_offsets\":[8,8]},"
      " \"a\" : {\"data_offsets\":[16,20],\"dtype\":\"U16\",\"shape\":[2]} }"
      "        ";
  double z = -0.75;
  std::string data(reinterpret_cast<const char*>(&z), 8);
  data += std::string(8, '\x7f'); // a gap nobody names
  data += std::string("\x05\x00\x00\x01", 4);
  write_file(path("o.safetensors"), st_file(header, data));
  auto [arrays, meta] = load_safetensors(path("o.safetensors"));
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"a", "b"}}));
  EXPECT_EQ(arrays.at("z").item<double>(), -0.75);
  EXPECT_EQ(arrays.at("e\xc3\xa9").shape(), (Shape{0, 2}));
  EXPECT_EQ(arrays.at("e\xc3\xa9").dtype(), bfloat16);
  EXPECT_EQ(to_doubles(arrays.at("a")), (std::vector<double>{5, 256}));
}

TEST_F(Safetensors, StreamsWithoutAKnownSize) {
  auto a = slice(random_any({5, 6}, complex64), Shape{0, 1}, Shape{5, 6},
                 Shape{2, 1});
  BytesWriter w;
  save_safetensors(w, {{"a", a}}, {{"m", "1"}});
  BytesReader r(w.bytes);
  auto [arrays, meta] = load_safetensors(r);
  EXPECT_TRUE(same_array(arrays.at("a"), a));
  EXPECT_EQ(meta.at("m"), "1");
}

TEST_F(Safetensors, BadArguments) {
  EXPECT_THROW(save_safetensors(path("x"), {{"__metadata__", array(1.0f)}}),
               std::invalid_argument);
}

TEST_F(Safetensors, ErrorsNameTheFileAndTheProblem) {
  auto expect_error = [&](const std::string& header, const std::string& data,
                          const std::string& part) {
    std::string file = path("bad.safetensors");
    write_file(file, st_file(header, data));
    try {
      load_safetensors(file);
      ADD_FAILURE() << "no error for " << header;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << e.what();
    }
  };
  std::string d16(16, '\1');
  expect_error("{\"a\":", "", "not valid");
  expect_error("[1, 2]", "", "not a JSON object");
  expect_error("{\"a\":1}", "", "not described by an object");
  expect_error(
      "{\"a\":{\"dtype\":\"F8_E5M2\",\"shape\":[4],"
      "\"data_offsets\":[0,4]}}",
      d16, "unsupported dtype F8_E5M2");
  expect_error("{\"a\":{\"shape\":[4],\"data_offsets\":[0,16]}}", d16,
               "no dtype");
  expect_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],"
      "\"data_offsets\":[0,16]}}",
      d16, "non-negative integer");
  expect_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],"
      "\"data_offsets\":[0,16]}}",
      d16, "for 12 bytes");
  expect_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],"
      "\"data_offsets\":[16,0]}}",
      d16, "invalid data_offsets");
  expect_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[8],"
      "\"data_offsets\":[0,32]}}",
      d16, "past the end");
  expect_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":"
      "[0,16]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
      "\"data_offsets\":[8,12]}}",
      d16, "overlaps");
  expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"shape\":[4]}}", d16,
               "duplicate key");
  expect_error("{\"__metadata__\":{\"k\":1}}", "", "not a string");
  expect_error(std::string(100, '[') + std::string(100, ']'), "",
               "nested too deeply");
  // A length larger than the file.
  write_file(path("len.safetensors"),
             std::string("\xff\xff\xff\x7f", 4) + std::string(4, '\0') + "{}");
  EXPECT_THROW(load_safetensors(path("len.safetensors")), std::runtime_error);
  EXPECT_THROW(load_safetensors(path("missing.safetensors")),
               std::runtime_error);
}

} // namespace
} // namespace kiln::test
