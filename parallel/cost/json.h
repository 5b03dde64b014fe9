// A JSON value built in code and written as text: what `shardlab-plan --json` prints.
//
//   Json out = Json::object();
//   out.set("seconds", 1.5e-3).set("path", "ici").set("axes", Json::array().push(4).push(4));
//   std::cout << out.dump() << "\n";
//
// Numbers print with 17 significant digits (round-trip exact); non-finite numbers print as
// null. Object keys keep insertion order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace shardlab::cost {

class Json {
 public:
  Json() = default;  // null
  Json(double value) : value_(value) {}
  Json(int value) : value_(static_cast<double>(value)) {}
  Json(int64_t value) : value_(static_cast<double>(value)) {}
  Json(bool value) : value_(value) {}
  Json(std::string value) : value_(std::move(value)) {}
  Json(const char* value) : value_(std::string(value)) {}

  static Json object();
  static Json array();
  Json& set(const std::string& key, Json value);  // object member (appended)
  Json& push(Json value);                         // array element
  std::string dump(int indent = 2) const;

 private:
  using Members = std::vector<std::pair<std::string, Json>>;
  using Elements = std::vector<Json>;
  void write(std::string& out, int indent, int depth) const;
  std::variant<std::monostate, double, bool, std::string, Members, Elements> value_;
};

}  // namespace shardlab::cost
