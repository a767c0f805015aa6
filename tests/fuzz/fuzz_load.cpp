// libFuzzer target for one loader (KILN_FUZZ_FORMAT: 0 npy, 1 safetensors,
// 2 gguf). Every input must load or raise std::exception; nothing may
// crash, read out of bounds or allocate far past the input's size (run
// with -malloc_limit_mb, scripts/fuzz). The first byte picks whether the
// source tells its size (a file) or not (a stream or zip member), since
// the two take different checks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "kiln/io/io.h"
#include "kiln/ops/ops.h"

namespace {

class BytesReader : public kiln::io::Reader {
 public:
  BytesReader(const uint8_t* data, size_t n, bool tell_size)
      : data_(data), n_(n), tell_size_(tell_size) {}
  std::string label() const override { return "<fuzz input>"; }

 protected:
  size_t read_some(void* dst, size_t n) override {
    n = std::min(n, n_ - at_);
    if (n) std::memcpy(dst, data_ + at_, n);
    at_ += n;
    return n;
  }
  std::optional<size_t> size() const override {
    if (!tell_size_) return std::nullopt;
    return n_;
  }

 private:
  const uint8_t* data_;
  size_t n_, at_ = 0;
  bool tell_size_;
};

// Reads every element, so a wrong size or stride shows as a bad read.
void touch(kiln::array a) {
  if (a.size() == 0) return;
  auto flat = kiln::reshape(kiln::astype(a, kiln::float64), {-1});
  kiln::sum(flat).eval();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  if (n == 0) return 0;
  BytesReader in(data + 1, n - 1, data[0] & 1);
  try {
#if KILN_FUZZ_FORMAT == 0
    touch(kiln::load(in));
#elif KILN_FUZZ_FORMAT == 1
    for (auto& [name, a] : kiln::load_safetensors(in).first) touch(a);
#else
    auto [arrays, meta] = kiln::load_gguf(in);
    for (auto& [name, a] : arrays) touch(a);
#endif
  } catch (const std::exception&) {
    // A clean error is a right answer to a bad file.
  }
  return 0;
}
