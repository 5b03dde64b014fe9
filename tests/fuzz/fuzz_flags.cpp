// train_gpt's flag parser and run checks on any command line (the input split at NUL
// bytes): a UserError naming the flag, or a configuration that passed every check.
#include "examples/train/run_flags.h"
#include "tests/fuzz/fuzz_input.h"

using namespace shardlab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = fuzz::as_arguments(data, size);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return fuzz::refuse_or_run([&] {
    const runtime::RunConfig run = cli::parse_run_config(static_cast<int>(argv.size()), argv.data());
    if (run.help) return;
    const parallel::Layout layout = run.layout();
    layout.validate(run.layout_checks(), 8);
  });
}
