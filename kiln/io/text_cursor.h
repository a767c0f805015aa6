// A cursor over text, shared by the small hand-written parsers (JSON, the
// .npy header's dict literal): skipping whitespace and taking or expecting
// one character. Each parser says how it fails.
#pragma once

#include <string>

namespace kiln::io {

class TextCursor {
 protected:
  explicit TextCursor(const std::string& s) : s_(s) {}
  virtual ~TextCursor() = default;

  /** Throws, naming the parser and the position. */
  [[noreturn]] virtual void fail(const std::string& why) = 0;

  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' ||
                              s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  /** Skips whitespace, then takes c if it comes next. */
  bool take(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }

  const std::string& s_;
  size_t i_ = 0;
};

} // namespace kiln::io
