// Writes the fuzzers' seed corpus: files kiln itself saves, of each dtype
// family and a few shapes, in DIR/npy, DIR/safetensors and DIR/gguf. Each
// file is prefixed with the byte the fuzz targets read first (0: a stream
// of unknown size, 1: a file that tells its size).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "kiln/io/io.h"
#include "kiln/ops/ops.h"

namespace {

class StringWriter : public kiln::io::Writer {
 public:
  std::string label() const override { return "<corpus>"; }
  void write(const void* src, size_t n) override {
    bytes.append(static_cast<const char*>(src), n);
  }
  std::string bytes;
};

void emit(const std::filesystem::path& dir, const std::string& name,
          const std::string& bytes) {
  for (char mode : {'\0', '\1'}) {
    std::ofstream f(dir / (name + (mode ? "-sized" : "-stream")),
                    std::ios::binary);
    f.put(mode);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_corpus DIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  fs::path root = argv[1];
  for (auto sub : {"npy", "safetensors", "gguf"}) {
    fs::create_directories(root / sub);
  }
  using namespace kiln;
  std::map<std::string, array> arrays = {
      {"f32", reshape(arange(0.0, 12.0, 1.0, float32), {3, 4})},
      {"f16", astype(arange(0.0, 5.0, 1.0), float16)},
      {"i64", reshape(arange(0.0, 6.0, 1.0, int64), {2, 1, 3})},
      {"i8", astype(arange(-3.0, 3.0, 1.0), int8)},
      {"scalar", array(2.5f)},
      {"empty", zeros({0, 3}, float32)},
  };
  std::map<std::string, array> npy_only = {
      {"bool", array({true, false, true})},
      {"u32", astype(arange(0.0, 4.0, 1.0), uint32)},
      {"c64", astype(arange(0.0, 3.0, 1.0), complex64)},
      {"bf16", astype(arange(0.0, 3.0, 1.0), bfloat16)},
      {"transposed", transpose(reshape(arange(0.0, 6.0, 1.0), {2, 3}))},
  };
  for (auto* set : {&arrays, &npy_only}) {
    for (auto& [name, a] : *set) {
      StringWriter w;
      save(w, a);
      emit(root / "npy", name, w.bytes);
    }
  }
  StringWriter st;
  save_safetensors(st, arrays, {{"format", "mlx"}});
  emit(root / "safetensors", "several", st.bytes);
  StringWriter st1;
  save_safetensors(st1, {{"one", arrays.at("f32")}});
  emit(root / "safetensors", "one", st1.bytes);
  StringWriter gg;
  save_gguf(gg, {{"f32", arrays.at("f32")}, {"i64", arrays.at("i64")}},
            {{"name", std::string("corpus")},
             {"list", std::vector<std::string>{"a", "b"}},
             {"n", array(7)}});
  emit(root / "gguf", "several", gg.bytes);
  return 0;
}
