// The small part of JSON that safetensors headers need (internal): a
// parser into a tree of values, and string quoting for the writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::io::detail {

struct Json {
  // Declared here, defined where Json is complete: a vector of pairs
  // holding Json needs the complete type (clang with libstdc++).
  Json();
  Json(const Json&);
  Json(Json&&) noexcept;
  Json& operator=(const Json&);
  Json& operator=(Json&&) noexcept;
  ~Json();

  enum class Type { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  /** A string's value, or a number's text as written. */
  std::string text;
  std::vector<Json> items;
  /** Members in file order (keys are unique). */
  std::vector<std::pair<std::string, Json>> members;

  /** A number that is a non-negative integer fitting 64 bits. */
  std::optional<uint64_t> as_uint() const;
  const Json* find(const std::string& key) const;
};

/** Parses text; throws std::invalid_argument saying where and why (the
 *  caller adds the file name). Nesting is limited so that junk input
 *  cannot exhaust the stack. */
Json parse_json(const std::string& text);

/** s as a JSON string literal, quotes included. */
std::string json_quote(const std::string& s);

} // namespace kiln::io::detail
