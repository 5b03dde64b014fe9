#include "parallel/runtime/async_checkpoint.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "framework/error.h"
#include "parallel/comm/comm.h"

namespace shardlab::runtime {

using Clock = std::chrono::steady_clock;

namespace {

// For tests only: SHARDLAB_FAULT_WRITE_HOLD=<file> keeps every background write after the
// run's first one open ("<path>.tmp" written, not committed) until <file> exists, at most two
// minutes. A kill -9 or a signal then surely lands inside a write however loaded the machine
// is: tests/fault_async.sh makes the file only after its fault was sent.
void hold_before_commit() {
  static std::atomic<int> writes{0};
  const char* release = std::getenv("SHARDLAB_FAULT_WRITE_HOLD");
  if (!release || writes++ == 0) return;
  const auto deadline = Clock::now() + std::chrono::minutes(2);
  while (!std::filesystem::exists(release) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

Checkpointer::Checkpointer(const parallel::Mesh& mesh, const parallel::ParallelModel& model, const RunConfig& run)
    : mesh_(mesh), model_(model), run_(run) {}

Checkpointer::~Checkpointer() { wait(); }

double Checkpointer::save(const std::string& path, const optim::Optimizer& optimizer, const TrainState& state) {
  const auto t0 = Clock::now();
  if (!run_.ckpt_async) {
    save_checkpoint(path, mesh_, model_, optimizer, state, run_);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  finish();  // one write in flight: the previous one is on disk (or its failure raised) first
  std::unique_ptr<CheckpointRecording> recording = parallel::record_checkpoint(
      mesh_, model_, optimizer, [&](CheckpointSink& sink) { write_run_attributes(sink, state, run_); });
  if (recording) {
    done_.store(false);
    writer_ = std::thread([this, path, recording = std::move(recording)] {
      // Nothing may escape the thread (std::terminate): every failure is kept for check().
      try {
        CheckpointWriter writer(path);
        recording->replay(writer);
        hold_before_commit();
        writer.commit();
      } catch (const std::exception& e) {
        failure_ = std::string("the background write of checkpoint ") + path + " (--ckpt-async) failed: " + e.what();
      } catch (...) {
        failure_ = "the background write of checkpoint " + path + " (--ckpt-async) failed";
      }
      done_.store(true, std::memory_order_release);
    });
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void Checkpointer::wait() {
  if (writer_.joinable()) writer_.join();
}

void Checkpointer::check() {
  if (!run_.ckpt_async) return;
  if (done_.load(std::memory_order_acquire)) wait();
  std::string failure;
  if (!writer_.joinable()) failure.swap(failure_);  // joined: the thread wrote failure_ before
  parallel::raise_agreed_error(mesh_.comm(), failure);
}

void Checkpointer::finish() {
  wait();
  check();
}

}  // namespace shardlab::runtime
