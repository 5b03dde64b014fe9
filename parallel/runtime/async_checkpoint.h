// Checkpointer: the training loop's checkpoint saves, written in the loop (the default) or,
// under --ckpt-async, by a background thread while training goes on.
//
// An asynchronous save gathers the state on the training thread -- every collective a
// sharded layout (ZeRO, FSDP, tensor) needs, so no other thread ever calls MPI -- into a
// CheckpointRecording in mesh rank 0's memory, and returns; a background thread on rank 0
// then writes the file (HDF5, no MPI) the usual atomic way: "<path>.tmp", fsync, seal,
// rename, so a kill -9 at any moment leaves the last complete checkpoint loadable. One
// write is in flight at a time: a save first waits for the previous one.
//
// HDF5 is the serial, not thread-safe build: while a write is in flight no other thread may
// call it. train_gpt reads checkpoints (--resume) before the first save, and calls wait()
// before its one other HDF5 use (--dump-grads); evaluation and metrics use no HDF5.
//
// A failed background write (a full disk) is caught in the thread (the partial file
// removed, the previous checkpoint intact); check() at the next step boundary, or the next
// save or finish(), raises it as the same UserError on every rank. The destructor (an
// exception leaving the loop) waits for a write in flight, raising nothing.
//
// For tests only: SHARDLAB_FAULT_WRITE_HOLD=<file> holds every background write after the
// first before its commit, its .tmp file open, until <file> exists (tests/fault_async.sh).
//
//   Checkpointer checkpoints(mesh, parallel_model, run);
//   for (...) { step; checkpoints.check(); if (due) blocked = checkpoints.save(path, *optimizer, state); }
//   checkpoints.finish();  // also before exiting on preemption
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "parallel/runtime/training_state.h"

namespace shardlab::runtime {

class Checkpointer {
 public:
  Checkpointer(const parallel::Mesh& mesh, const parallel::ParallelModel& model, const RunConfig& run);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Collective: saves the checkpoint at `path`; returns the seconds the caller was blocked
  // (the whole write, or under --ckpt-async the wait for the previous one and the copy).
  double save(const std::string& path, const optim::Optimizer& optimizer, const TrainState& state);
  // Collective under --ckpt-async (one integer all_reduce; nothing otherwise): a background
  // write that has failed becomes the same UserError on every rank.
  void check();
  // Collective: waits for the write in flight, then check().
  void finish();
  // This rank only: waits for the write in flight (before any other use of HDF5).
  void wait();

 private:
  const parallel::Mesh& mesh_;
  const parallel::ParallelModel& model_;
  const RunConfig& run_;
  std::thread writer_;             // rank 0's write in flight, if any
  std::atomic<bool> done_{false};  // the writer has finished (set by it)
  std::string failure_;            // its error, "" when it succeeded; read after joining
};

}  // namespace shardlab::runtime
