#include "kiln/io/json.h"

#include <stdexcept>
#include <unordered_set>

#include "kiln/io/text_cursor.h"

namespace kiln::io::detail {

Json::Json() = default;
Json::Json(const Json&) = default;
Json::Json(Json&&) noexcept = default;
Json& Json::operator=(const Json&) = default;
Json& Json::operator=(Json&&) noexcept = default;
Json::~Json() = default;

namespace {

constexpr int kMaxDepth = 64;

class Parser : TextCursor {
 public:
  explicit Parser(const std::string& s) : TextCursor(s) {}

  Json document() {
    Json v = value(0);
    space();
    if (i_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) override {
    throw std::invalid_argument("invalid JSON at byte " + std::to_string(i_) +
                                ": " + why);
  }
  bool word(const char* w) {
    std::string ws(w);
    if (s_.compare(i_, ws.size(), ws) != 0) return false;
    i_ += ws.size();
    return true;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    space();
    if (i_ >= s_.size()) fail("unexpected end of input");
    Json v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.type = Json::Type::object;
      if (take('}')) return v;
      std::unordered_set<std::string> keys; // linear time in the members
      do {
        space();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a key");
        std::string key = string();
        if (!keys.insert(key).second) fail("duplicate key \"" + key + "\"");
        expect(':');
        v.members.emplace_back(std::move(key), value(depth + 1));
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.type = Json::Type::array;
      if (take(']')) return v;
      do {
        v.items.push_back(value(depth + 1));
      } while (take(','));
      expect(']');
    } else if (c == '"') {
      v.type = Json::Type::string;
      v.text = string();
    } else if (word("true") || word("false")) {
      v.type = Json::Type::boolean;
      v.boolean = c == 't';
    } else if (word("null")) {
      v.type = Json::Type::null;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = Json::Type::number;
      size_t start = i_;
      while (i_ < s_.size() &&
             std::string("+-0123456789.eE").find(s_[i_]) != std::string::npos) {
        ++i_;
      }
      v.text = s_.substr(start, i_ - start);
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= unsigned(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= unsigned(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= unsigned(h - 'A' + 10);
      } else {
        fail("bad \\u escape");
      }
    }
    return v;
  }

  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++i_; // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        fail("control character in a string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          // A high surrogate pairs with the low surrogate that follows.
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {
            i_ += 2;
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xD800 && cp < 0xE000) {
            fail("unpaired surrogate");
          }
          utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }
};

} // namespace

std::optional<uint64_t> Json::as_uint() const {
  if (type != Type::number || text.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + uint64_t(c - '0');
  }
  return v;
}

const Json* Json::find(const std::string& key) const {
  for (auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

Json parse_json(const std::string& text) { return Parser(text).document(); }

std::string json_quote(const std::string& s) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace kiln::io::detail
