// The checkpoint reader on any bytes: refused with a UserError, or read through -- every
// tensor, attribute and the config -- without a crash or a sanitizer report.
#include "framework/checkpoint.h"
#include "tests/fuzz/fuzz_input.h"

using namespace shardlab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::as_file(data, size, ".h5");
  return fuzz::refuse_or_run([&] {
    CheckpointReader reader(path);
    for (const std::string& name : reader.tensor_names()) {
      const Shape shape = reader.shape(name);
      if (numel_of(shape) > (1 << 20)) continue;
      std::vector<float> values(numel_of(shape));
      reader.read(name, shape, values);
    }
    for (const auto& [key, value] : reader.attributes()) (void)value;
    (void)reader.config();
  });
}
