// Checkpoint files from a ParallelModel, in any layout: every tensor is stored unsharded
// under its parameter name (docs/checkpoint_format.md), so that any layout resumes any
// checkpoint. The data-parallel strategy is the sharded store (GradientSync::save and
// load gather and cut its shards, through the model-parallel shards); this file decides
// who opens, appends to and commits the one file.
//
//   save_checkpoint(mesh, parallel, *optimizer, path, [&](CheckpointSink& w) { w.set_attribute("step", s); });
//   load_checkpoint(CheckpointReader(path), parallel, *optimizer);
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "framework/checkpoint.h"
#include "framework/checkpoint_recording.h"
#include "optim/optimizer.h"
#include "parallel/comm/mesh.h"
#include "parallel/parallel_model.h"

namespace shardlab::parallel {

// Collective over the mesh: writes every parameter and its state in `optimizer` (built
// over parallel.parameters()), unsharded, to the checkpoint at `path`, with the attribute
// optimizer_step; then `finish` adds the run's attributes on mesh rank 0, which commits
// the file. Without a pipe axis rank 0 writes it all; with one, each stage's
// leader (its rank whose other coordinates are 0) writes its stages' tensors into the
// same file in turn -- so those ranks need a filesystem they share. A write that fails on
// any rank (a full disk) is the same UserError on every rank, the previous checkpoint at
// `path` untouched and the partial file removed.
void save_checkpoint(const Mesh& mesh, const ParallelModel& parallel, const optim::Optimizer& optimizer,
                     const std::string& path, const std::function<void(CheckpointSink&)>& finish);
// Collective over the mesh, like save_checkpoint, but into memory: mesh rank 0 returns the
// whole checkpoint (then `finish`'s attributes), every other rank nullptr. Writing it
// (CheckpointRecording::replay) needs no collective, so another thread can do it. With a
// pipe axis each stage's leader records its stages and sends the recording to rank 0 (on
// the pipe axis), which joins them in stage order: the file save_checkpoint writes.
std::unique_ptr<CheckpointRecording> record_checkpoint(const Mesh& mesh, const ParallelModel& parallel,
                                                       const optim::Optimizer& optimizer,
                                                       const std::function<void(CheckpointSink&)>& finish);
// Every rank reads the parameters and optimizer state it owns, and the optimizer's step.
void load_checkpoint(const CheckpointReader& reader, const ParallelModel& parallel, optim::Optimizer& optimizer);

}  // namespace shardlab::parallel
