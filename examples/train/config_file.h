// Run config files: every train_gpt flag written as a key of a JSON or TOML file, read
// with --config FILE before the command line (so flags given there override the file),
// and the run's whole configuration saved into every checkpoint, so that
// `--config ckpt.h5` brings a run's settings back.
//
//   # run.toml                              // run.json
//   model = "llama-small"                   {"model": "llama-small", "mesh": "data=2",
//   [parallel]                               "zero": 1, "pp_layers": [3, 5]}
//   mesh = "data=2"
//   zero = 1
//
// Keys are the flag names, with '-' or '_'; tables (TOML) and objects (JSON) group keys
// and are otherwise ignored; arrays become comma-separated lists; true/false set or
// clear a switch.
#pragma once

#include <cxxopts.hpp>
#include <string>
#include <utility>
#include <vector>

namespace shardlab::cli {

// The flags FILE stands for, as "--key=value" arguments, in the file's order. FILE is
// .json, .toml, or a checkpoint (.h5) whose saved run config is read. UserError naming
// the file (and the line, for a syntax error) when it cannot be read or parsed.
std::vector<std::string> config_file_flags(const std::string& path);

// argv with every `--config FILE` replaced by FILE's flags, in place: what follows it on
// the command line overrides it. argv[0] is kept.
struct ExpandedArgs {
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> from_files;  // (flag name, the file it came from)
  // " (key 'x' of config file F)" when `parser_message` names a flag that came from a file.
  std::string origin_of(const std::string& parser_message) const;
};
ExpandedArgs expand_config_flags(int argc, const char* const* argv);

// Every option's value (given or default) as one JSON object keyed by flag name
// ("d-model"), leaving out those that are not settings of the run (help, config, resume,
// dry-run). What checkpoints store as their root attribute "run_config".
std::string settings_json(const cxxopts::ParseResult& parsed);

}  // namespace shardlab::cli
