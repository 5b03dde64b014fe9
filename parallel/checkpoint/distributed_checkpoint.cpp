#include "parallel/checkpoint/distributed_checkpoint.h"

#include <memory>

#include "parallel/comm/collectives.h"

namespace shardlab::parallel {
namespace {

// A stage's leader: the rank of its pipe coordinate whose other coordinates are all 0.
bool stage_leader(const Mesh& mesh) {
  for (const char* axis : {kDataAxis, kFsdpAxis, kExpertAxis, kContextAxis, kTensorAxis}) {
    if (mesh.has_axis(axis) && mesh.coord(axis) != 0) return false;
  }
  return true;
}

}  // namespace

void save_checkpoint(const Mesh& mesh, const ParallelModel& parallel, const optim::Optimizer& optimizer,
                     const std::string& path, const std::function<void(CheckpointWriter&)>& finish) {
  const int stages = parallel.pipeline() ? mesh.axis_size(kPipeAxis) : 1;
  const int here = stages > 1 ? mesh.coord(kPipeAxis) : 0;
  const bool leader = stage_leader(mesh);
  for (int stage = 0; stage < stages; ++stage) {
    if (stage == here) {
      std::unique_ptr<CheckpointWriter> writer;
      if (leader) {
        const auto mode = stage == 0 ? CheckpointWriter::Mode::kCreate : CheckpointWriter::Mode::kAppend;
        writer = std::make_unique<CheckpointWriter>(path, mode);
      }
      parallel.gradient_sync().save(writer.get(), optimizer);
      if (writer && stages == 1) {
        writer->set_attribute("optimizer_step", optimizer.step_count());
        finish(*writer);
        return writer->commit();
      }
      if (writer) writer->hand_off();
    }
    float token = 0.0f;  // the next stage's leader appends only once this one has closed the file
    if (stages > 1) all_reduce(mesh.axis(kPipeAxis), {&token, 1});
  }
  if (stages > 1 && mesh.rank() == 0) {
    CheckpointWriter writer(path, CheckpointWriter::Mode::kAppend);
    writer.set_attribute("optimizer_step", optimizer.step_count());
    finish(writer);
    writer.commit();
  }
}

void load_checkpoint(const CheckpointReader& reader, const ParallelModel& parallel, optim::Optimizer& optimizer) {
  parallel.gradient_sync().load(reader, optimizer);
  optimizer.set_step_count(reader.int_attribute("optimizer_step"));
}

}  // namespace shardlab::parallel
