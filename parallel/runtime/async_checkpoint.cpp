#include "parallel/runtime/async_checkpoint.h"

#include <chrono>
#include <cstdlib>

#include "framework/error.h"
#include "parallel/comm/comm.h"

namespace shardlab::runtime {

using Clock = std::chrono::steady_clock;

namespace {

// For tests only: SHARDLAB_FAULT_WRITE_DELAY=S keeps a background write's "<path>.tmp" open
// S seconds before its commit, so that a kill -9 or a signal surely lands inside the write
// (tests/fault_async.sh).
void hold_before_commit() {
  if (const char* seconds = std::getenv("SHARDLAB_FAULT_WRITE_DELAY")) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(seconds)));
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
