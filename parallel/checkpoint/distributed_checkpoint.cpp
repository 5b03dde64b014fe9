#include "parallel/checkpoint/distributed_checkpoint.h"

#include <cstring>
#include <memory>
#include <vector>

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

namespace {

// A pipeline stage leader's recording, sent to the first stage's leader (mesh rank 0) on the
// pipe axis as its byte count and its bytes (padded to whole floats: the collectives carry
// floats, and bits travel unchanged).
void send_recording(const Mesh& mesh, const CheckpointRecording& recording) {
  const std::vector<uint8_t> bytes = recording.serialize();
  uint64_t size = bytes.size();
  float header[2];
  std::memcpy(header, &size, sizeof size);
  std::vector<float> payload((bytes.size() + 3) / 4);
  std::memcpy(payload.data(), bytes.data(), bytes.size());
  send(mesh.axis(kPipeAxis), header, 0);
  send(mesh.axis(kPipeAxis), payload, 0);
}

CheckpointRecording receive_recording(const Mesh& mesh, int stage) {
  float header[2];
  recv(mesh.axis(kPipeAxis), header, stage);
  uint64_t size = 0;
  std::memcpy(&size, header, sizeof size);
  std::vector<float> payload((size + 3) / 4);
  recv(mesh.axis(kPipeAxis), payload, stage);
  return CheckpointRecording::deserialize({reinterpret_cast<const uint8_t*>(payload.data()), size});
}

}  // namespace

std::unique_ptr<CheckpointRecording> record_checkpoint(const Mesh& mesh, const ParallelModel& parallel,
                                                       const optim::Optimizer& optimizer,
                                                       const std::function<void(CheckpointSink&)>& finish) {
  const int stages = parallel.pipeline() ? mesh.axis_size(kPipeAxis) : 1;
  // Every stage's leader records its stage (stage_leader: without a pipe axis, rank 0 alone).
  auto recording = stage_leader(mesh) ? std::make_unique<CheckpointRecording>() : nullptr;
  parallel.gradient_sync().save(recording.get(), optimizer);
  if (stages > 1 && recording) {
    // The leaders are the pipe axis through rank 0: the later stages' parts join rank 0's,
    // in stage order, as save_checkpoint's appends would lay them in the file.
    if (mesh.coord(kPipeAxis) != 0) {
      send_recording(mesh, *recording);
      recording.reset();
    } else {
      for (int stage = 1; stage < stages; ++stage) recording->append(receive_recording(mesh, stage));
    }
  }
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
