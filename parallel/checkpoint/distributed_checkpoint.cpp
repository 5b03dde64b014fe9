#include "parallel/checkpoint/distributed_checkpoint.h"

#include <memory>

#include "framework/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm.h"

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
                     const std::string& path, const std::function<void(CheckpointSink&)>& finish) {
  const int stages = parallel.pipeline() ? mesh.axis_size(kPipeAxis) : 1;
  const int here = stages > 1 ? mesh.coord(kPipeAxis) : 0;
  const bool leader = stage_leader(mesh);
  // This rank's first failed write (a full disk): it still takes part in every collective
  // below, writing nothing more, and every rank raises the failure at the end.
  std::string failure;
  bool stage_failed = false;  // an earlier pipeline stage's leader failed: write nothing more
  const auto attempt = [&](const std::function<void()>& io) {
    if (!failure.empty() || stage_failed) return;
    try {
      io();
    } catch (const UserError& e) {
      failure = e.what();
    }
  };
  const auto commit = [&](CheckpointWriter& writer) {
    writer.set_attribute("optimizer_step", optimizer.step_count());
    finish(writer);
    writer.commit();
  };
  for (int stage = 0; stage < stages; ++stage) {
    if (stage == here) {
      std::unique_ptr<CheckpointWriter> writer;
      if (leader) {
        const auto mode = stage == 0 ? CheckpointWriter::Mode::kCreate : CheckpointWriter::Mode::kAppend;
        attempt([&] { writer = std::make_unique<CheckpointWriter>(path, mode); });
      }
      parallel.gradient_sync().save(writer.get(), optimizer);  // a writer remembers a failed write
      if (writer) attempt([&] { stages == 1 ? commit(*writer) : writer->hand_off(); });
    }
    // The next stage's leader appends only once this one has closed the file, and not at
    // all when an earlier stage failed (the stage leaders are the pipe axis through rank 0).
    float failed = failure.empty() ? 0.0f : 1.0f;
    if (stages > 1) all_reduce(mesh.axis(kPipeAxis), {&failed, 1}, ReduceOp::kMax);
    stage_failed = failed > 0;
  }
  if (stages > 1 && mesh.rank() == 0) {
    attempt([&] {
      CheckpointWriter writer(path, CheckpointWriter::Mode::kAppend);
      commit(writer);
    });
  }
  raise_agreed_error(mesh.comm(), failure);
}

bool records_in_memory(const Mesh& mesh, const ParallelModel& parallel) {
  return !parallel.pipeline() || mesh.axis_size(kPipeAxis) == 1;
}

std::unique_ptr<CheckpointRecording> record_checkpoint(const Mesh& mesh, const ParallelModel& parallel,
                                                       const optim::Optimizer& optimizer,
                                                       const std::function<void(CheckpointSink&)>& finish) {
  SL_ASSERT(records_in_memory(mesh, parallel), "record_checkpoint with more than one pipeline stage");
  // Without a pipe axis rank 0 is the one writer save_checkpoint would open (stage_leader).
  auto recording = mesh.rank() == 0 ? std::make_unique<CheckpointRecording>() : nullptr;
  parallel.gradient_sync().save(recording.get(), optimizer);
  if (recording) {
    recording->set_attribute("optimizer_step", optimizer.step_count());
    finish(*recording);
  }
  return recording;
}

void load_checkpoint(const CheckpointReader& reader, const ParallelModel& parallel, optim::Optimizer& optimizer) {
  parallel.gradient_sync().load(reader, optimizer);
  optimizer.set_step_count(reader.int_attribute("optimizer_step"));
}

}  // namespace shardlab::parallel
