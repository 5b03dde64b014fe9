// CheckpointRecording: a checkpoint held in memory -- every tensor piece and attribute a
// save streams into it, copied, in order -- to be written to a file later, by another
// thread (async_checkpoint.h: --ckpt-async). Recording touches no file and no HDF5, so the
// save's collectives run on the training thread while a background thread does the I/O.
//
// replay() passes the recording to a CheckpointWriter, so the file is the one a direct
// write gives, written the same atomic way: "<path>.tmp", then commit(): fsync, seal,
// rename. A process killed before the rename leaves the previous checkpoint at <path>.
//
// A recording also travels as bytes (serialize / deserialize), so that the parts pipeline
// stages record on their own ranks can be joined on the one rank that writes the file
// (append).
//
//   CheckpointRecording r;
//   parallel.gradient_sync().save(&r, optimizer);   // collective: the gathered tensors are copied
//   r.set_attribute("step", int64_t{100});
//   std::thread([&] { CheckpointWriter w("run/ckpt_000100.h5"); r.replay(w); w.commit(); });
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "framework/checkpoint.h"
#include "framework/checkpoint_sink.h"

namespace shardlab {

class CheckpointRecording final : public CheckpointSink {
 public:
  void write(const std::string& name, const Shape& shape, std::span<const float> data) override;
  void write_range(const std::string& name, const Shape& shape, int64_t flat_offset,
                   std::span<const float> data) override;
  void set_attribute(const std::string& key, const AttributeValue& value) override;
  void set_config(const Attributes& config) override;

  int64_t bytes() const { return bytes_; }  // of tensor data held
  // Every write and attribute, in the order recorded (the writer remembers a failed one).
  void replay(CheckpointWriter& writer) const;

  // `other`'s entries after this one's, as if they had been recorded here next.
  void append(CheckpointRecording&& other);
  std::vector<uint8_t> serialize() const;
  // UserError if `bytes` are not a serialized recording.
  static CheckpointRecording deserialize(std::span<const uint8_t> bytes);

 private:
  enum class Kind : uint8_t { kWrite, kRange, kAttribute, kConfig };
  struct Entry {  // every member initialised: entries are built from designated initializers
    Kind kind = Kind::kWrite;
    std::string name{};         // tensor or attribute
    Shape shape{};
    int64_t offset = 0;         // kRange
    std::vector<float> data{};  // kWrite, kRange: a copy
    AttributeValue value{};     // kAttribute
    Attributes config{};        // kConfig
  };
  std::vector<Entry> entries_;
  int64_t bytes_ = 0;
};

}  // namespace shardlab
