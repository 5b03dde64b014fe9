#include "examples/train/config_file.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <toml++/toml.h>

#include "framework/checkpoint.h"
#include "framework/error.h"

namespace shardlab::cli {
namespace {

using nlohmann::json;

std::string flag_name(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One JSON value as a flag's text: numbers as written, arrays comma-joined.
std::string flag_text(const json& v, const std::string& key, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return v.dump();
  if (v.is_array()) {
    std::string out;
    for (const json& item : v) out += (out.empty() ? "" : ",") + flag_text(item, key, path);
    return out;
  }
  throw UserError("config file " + path + ": key '" + key + "' has a value of type " + v.type_name() +
                  "; give a string, number, boolean or list");
}

void add_flags(const json& object, const std::string& path, std::vector<std::string>& out) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) {  // a group of keys ([parallel] in TOML)
      add_flags(value, path, out);
    } else if (!value.is_null()) {
      out.push_back("--" + flag_name(key) + "=" + flag_text(value, key, path));
    }
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read --config file '" + path + "'; give a .json, .toml or checkpoint (.h5) path");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json parse_json(const std::string& text, const std::string& path) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw UserError("config file " + path + " must hold one JSON object of flag: value");
    return j;
  } catch (const json::parse_error& e) {
    throw UserError("config file " + path + " is not valid JSON: " + e.what());
  }
}

json parse_toml(const std::string& text, const std::string& path) {
  try {
    const toml::table table = toml::parse(text, path);
    std::stringstream s;
    s << toml::json_formatter{table};
    return json::parse(s.str());
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw UserError("config file " + path + " is not valid TOML (line " + std::to_string(where.line) + ", column " +
                    std::to_string(where.column) + "): " + std::string(e.description()));
  }
}

}  // namespace

std::vector<std::string> config_file_flags(const std::string& path) {
  json settings;
  if (ends_with(path, ".h5")) {
    const CheckpointReader reader(path);
    if (!reader.attributes().contains("run_config")) {
      throw UserError("checkpoint " + path + " holds no run config (written before train_gpt saved one); give the "
                      "flags instead");
    }
    settings = parse_json(reader.string_attribute("run_config"), path);
  } else if (ends_with(path, ".toml")) {
    settings = parse_toml(read_text(path), path);
  } else if (ends_with(path, ".json")) {
    settings = parse_json(read_text(path), path);
  } else {
    throw UserError("--config " + path + ": the file must end in .json, .toml or .h5 (a checkpoint)");
  }
  std::vector<std::string> flags;
  add_flags(settings, path, flags);
  return flags;
}

ExpandedArgs expand_config_flags(int argc, const char* const* argv) {
  ExpandedArgs out;
  out.args.emplace_back(argc > 0 ? argv[0] : "train_gpt");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string path;
    if (arg == "--config") {
      if (i + 1 >= argc) throw UserError("--config needs a file: --config run.toml");
      path = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      path = arg.substr(9);
    } else {
      out.args.push_back(arg);
      continue;
    }
    for (std::string& flag : config_file_flags(path)) {
      if (flag.rfind("--config=", 0) == 0) throw UserError("config file " + path + " names another --config; nest nothing");
      out.from_files.emplace_back(flag.substr(2, flag.find('=') - 2), path);
      out.args.push_back(std::move(flag));
    }
  }
  return out;
}

std::string ExpandedArgs::origin_of(const std::string& parser_message) const {
  for (const auto& [name, path] : from_files) {
    if (parser_message.find(name) != std::string::npos) return " (key '" + name + "' of config file " + path + ")";
  }
  return "";
}

std::string settings_json(const cxxopts::ParseResult& parsed) {
  json out = json::object();
  const auto skip = [](const std::string& key) {
    return key == "help" || key == "config" || key == "resume" || key == "init-from" || key == "dry-run";
  };
  for (const auto& kv : parsed.defaults()) {
    if (!skip(kv.key())) out[kv.key()] = kv.value();
  }
  for (const auto& kv : parsed.arguments()) {  // given: overrides the default, the last one wins
    if (!skip(kv.key())) out[kv.key()] = kv.value();
  }
  return out.dump();
}

}  // namespace shardlab::cli
