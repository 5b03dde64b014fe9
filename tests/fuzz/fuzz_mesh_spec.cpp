// The mesh spec parser ("data=2,tensor=4", torus options) and the layout's checks against
// a model, on any text: a UserError or a layout, never a crash.
#include "framework/nn/config.h"
#include "parallel/layout.h"
#include "tests/fuzz/fuzz_input.h"

using namespace shardlab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  return fuzz::refuse_or_run([&] {
    parallel::Layout layout = parallel::Layout::from_spec(spec);
    layout.microbatches = 2;
    static const nn::ModelConfig model = nn::ModelConfig::preset("llama-moe-tiny");
    layout.validate({.model = model, .global_batch = 8}, 8);
  });
}
