// The llm.c token-shard reader on any bytes: refused with a UserError naming what is
// wrong (header, size against its count), or read whole.
#include "framework/data/token_files.h"
#include "tests/fuzz/fuzz_input.h"

using namespace shardlab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::as_file(data, size, ".bin");
  return fuzz::refuse_or_run([&] { (void)data::read_token_file(path); });
}
