#include "framework/checkpoint_recording.h"

namespace shardlab {

void CheckpointRecording::write(const std::string& name, const Shape& shape, std::span<const float> data) {
  bytes_ += static_cast<int64_t>(data.size_bytes());
  steps_.push_back([name, shape, copy = std::vector<float>(data.begin(), data.end())](CheckpointWriter& w) {
    w.write(name, shape, copy);
  });
}

void CheckpointRecording::write_range(const std::string& name, const Shape& shape, int64_t flat_offset,
                                      std::span<const float> data) {
  bytes_ += static_cast<int64_t>(data.size_bytes());
  steps_.push_back([name, shape, flat_offset, copy = std::vector<float>(data.begin(), data.end())](
                       CheckpointWriter& w) { w.write_range(name, shape, flat_offset, copy); });
}

void CheckpointRecording::set_attribute(const std::string& key, const AttributeValue& value) {
  steps_.push_back([key, value](CheckpointWriter& w) { w.set_attribute(key, value); });
}

void CheckpointRecording::set_config(const Attributes& config) {
  steps_.push_back([config](CheckpointWriter& w) { w.set_config(config); });
}

void CheckpointRecording::replay(CheckpointWriter& writer) const {
  for (const auto& step : steps_) step(writer);
}

}  // namespace shardlab
