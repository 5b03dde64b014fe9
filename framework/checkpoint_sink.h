// CheckpointSink: where a save streams a checkpoint's tensors and attributes -- straight
// into the file (CheckpointWriter, checkpoint.h) or into memory, for a background thread to
// write later (CheckpointRecording, checkpoint_recording.h). The parallel strategies' save()
// takes one, so a sharded layout gathers its tensors the same way for both.
//
//   void save(CheckpointSink* sink) { if (sink) sink->write("params/wte", wte.shape(), wte.span()); }
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>

#include "framework/tensor.h"

namespace shardlab {

using AttributeValue = std::variant<int64_t, double, std::string>;
using Attributes = std::map<std::string, AttributeValue>;

class CheckpointSink {
 public:
  virtual ~CheckpointSink() = default;
  // The whole tensor: data.size() == numel(shape).
  virtual void write(const std::string& name, const Shape& shape, std::span<const float> data) = 0;
  // Elements [flat_offset, flat_offset + data.size()) of the row-major flattened tensor
  // (a ZeRO shard of a flat parameter buffer, say).
  virtual void write_range(const std::string& name, const Shape& shape, int64_t flat_offset,
                           std::span<const float> data) = 0;
  virtual void set_attribute(const std::string& key, const AttributeValue& value) = 0;  // on the root group
  virtual void set_config(const Attributes& config) = 0;                                // on group "config"
};

}  // namespace shardlab
