// train_gpt's flags: argv (and --config files) parsed into a RunConfig (parallel/runtime/run_config.h).
//
// Parsing is pure (no MPI, no I/O beyond reading flags and --config files), so every rank
// of a job parses the same argv to the same config and validates it identically before
// the first collective. `--config FILE` (JSON, TOML or a checkpoint's saved settings,
// config_file.h) stands for the flags in FILE, overridden by those after it.
//
//   RunConfig run = parse_run_config(argc, argv);   // UserError on bad flags/values
//   if (run.help) { std::cout << run.help_text; return 0; }
#pragma once

#include <string>

#include "parallel/runtime/run_config.h"

namespace shardlab::cli {

runtime::RunConfig parse_run_config(int argc, const char* const* argv);
// The arguments after the program name, NUL-separated: what every rank must have been
// started with alike (parallel::check_same_configuration).
std::string command_line(int argc, const char* const* argv);

}  // namespace shardlab::cli
