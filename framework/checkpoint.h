// HDF5 checkpoints: one file per checkpoint, every tensor UNSHARDED under its name.
//
// Layout (docs/checkpoint_format.md): a dataset per tensor at its name as a path, e.g.
// "params/blocks.0.attn.wq" or "optim/m/blocks.0.attn.wq", row-major float32 with its
// global shape; run state ("step", "seed", "data_position", ...) as attributes of the root
// group; the model/run config as attributes of the group "config". Any layout can read
// any checkpoint: each rank reads only the hyperslab it owns.
//
// Writes are atomic: the writer fills "<path>.tmp"; commit() flushes and fsyncs it,
// renames it over <path> and fsyncs the directory. A writer destroyed (or a process
// killed) before commit() leaves the previous checkpoint at <path> untouched.
//
// A tensor may be written whole or in disjoint pieces (an N-d box or a flat element
// range), so a sharded run can stream its shards through one writer without ever
// holding the whole model; commit() checks that every element was written.
//
// A write that fails (a full disk) or that holds a non-finite value (a diverged run: no
// checkpoint is ever written with one) is remembered, and the writer's later writes are
// skipped; commit() or hand_off() throws it, and the destructor removes "<path>.tmp". So
// ranks that stream their shards to the writing rank through collectives stay in step with
// it to the end of the save, where they can agree on its outcome (raise_agreed_error).
//
// Every failure -- missing, truncated or corrupt file, missing tensor, shape that does
// not match the model -- throws UserError naming the file, the tensor and the shapes.
//
//   CheckpointWriter w("run/ckpt_000100.h5");
//   w.write("params/wte", wte.shape(), wte.span());
//   w.set_attribute("step", int64_t{100});
//   w.set_config({{"model", std::string("gpt2")}, {"n_layer", int64_t{4}}});
//   w.commit();
//
//   CheckpointReader r("run/ckpt_000100.h5");
//   r.read("params/wte", wte.shape(), wte.span());               // whole tensor
//   r.read_slab("params/wte", {256, 64}, {0, 32}, {256, 32}, shard);  // columns 32..63
//   int64_t step = r.int_attribute("step");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "framework/checkpoint_sink.h"
#include "framework/tensor.h"

namespace shardlab {

class CheckpointWriter final : public CheckpointSink {
 public:
  // kCreate creates (truncates) "<path>.tmp"; kAppend reopens the one an earlier writer
  // handed off, to add tensors to it (each pipeline stage writes its own in turn).
  enum class Mode { kCreate, kAppend };
  // Throws UserError when it cannot.
  explicit CheckpointWriter(std::string path, Mode mode = Mode::kCreate);
  ~CheckpointWriter() override;  // without commit(): closes and removes the temporary file
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The whole tensor: data.size() == numel(shape).
  void write(const std::string& name, const Shape& shape, std::span<const float> data) override;
  // The box offset[d] .. offset[d] + count[d] of a tensor of global `shape`; `data` holds the
  // box row-major. The first write of a name creates it; later ones must give the same shape.
  void write_slab(const std::string& name, const Shape& shape, const Shape& offset, const Shape& count,
                  std::span<const float> data);
  // Elements [flat_offset, flat_offset + data.size()) of the row-major flattened tensor
  // (a ZeRO shard of a flat parameter buffer, say).
  void write_range(const std::string& name, const Shape& shape, int64_t flat_offset,
                   std::span<const float> data) override;

  void set_attribute(const std::string& key, const AttributeValue& value) override;  // on the root group
  void set_config(const Attributes& config) override;                                // on group "config"

  // Throws the first failed write's UserError, if any; checks every tensor is complete,
  // then flush, fsync, rename over the target, fsync the directory. The writer is finished
  // afterwards.
  void commit();
  // Checks this writer's tensors are complete and closes "<path>.tmp" for a kAppend
  // writer to go on with; nothing is renamed. The writer is finished afterwards.
  void hand_off();

 private:
  void check_complete() const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class CheckpointReader {
 public:
  // Opens and validates the file; UserError when missing, truncated, corrupt or not a
  // shardlab checkpoint.
  explicit CheckpointReader(std::string path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const;
  std::vector<std::string> tensor_names() const;  // sorted, e.g. "optim/m/wte", "params/wte"
  bool has_tensor(const std::string& name) const;
  Shape shape(const std::string& name) const;     // UserError when missing

  // Each read first checks that the stored global shape equals `expected_shape` (the
  // model's), then fills `out` (sized exactly to what is read).
  void read(const std::string& name, const Shape& expected_shape, std::span<float> out) const;
  void read_slab(const std::string& name, const Shape& expected_shape, const Shape& offset, const Shape& count,
                 std::span<float> out) const;
  void read_range(const std::string& name, const Shape& expected_shape, int64_t flat_offset,
                  std::span<float> out) const;

  Attributes attributes() const;  // the root group's
  Attributes config() const;      // group "config"
  // One root attribute of the given type; UserError when missing or of another type.
  int64_t int_attribute(const std::string& key) const;
  double float_attribute(const std::string& key) const;
  std::string string_attribute(const std::string& key) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardlab
