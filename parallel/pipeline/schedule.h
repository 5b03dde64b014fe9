// Pipeline schedules as data (the book's chapter on training; GPipe, Megatron's 1F1B and
// interleaved 1F1B, ZB-H1 of "Zero Bubble Pipeline Parallelism").
//
// The model is cut into S = p * v stages (p ranks on the pipe axis, v virtual stages
// each); rank r holds stages r, r + p, ..., r + (v-1) p. A schedule is every rank's list
// of actions for one step of m microbatches:
//
//   Forward(mb, s)         run stage s forward on microbatch mb
//   Backward(mb, s)        its backward (input and weight gradients together)
//   BackwardInput(mb, s)   zero-bubble: only the input gradient (what the previous stage waits for)
//   BackwardWeight(mb, s)  zero-bubble: the weight gradient, deferred to fill a bubble
//   SendActivation(mb, s)  stage s's output to stage s + 1     RecvActivation(mb, s): stage s's input
//   SendGradient(mb, s)    stage s's input gradient to s - 1   RecvGradient(mb, s): stage s's output gradient
//
// One list drives everything: the executor (pipeline.h) runs it, --dry-run prints it as a
// timeline, the trace shows it. check() simulates all ranks' lists together before any
// of it runs, with sends that never block (MPI_Isend, completed at the end of the step)
// and receives that do: it proves every send meets its receive and that the order alone
// -- not MPI's buffering -- cannot deadlock, and it predicts the bubble and the
// microbatches in flight. Its costs are relative: a stage's forward 1, its backward 2
// (1 + 1 split), divided by v for interleaved stages.
//
//   const PipelineSchedule s = make_pipeline_schedule(ScheduleKind::k1F1B, /*ranks=*/4, /*virtual=*/1, /*m=*/8);
//   const ScheduleCheck c = check(s);     // throws on a deadlock or an unmatched message
//   c.bubble;                             // 3/11: the book's (p-1)/(m+p-1)
#pragma once

#include <compare>
#include <string>
#include <vector>

namespace shardlab::parallel {

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved, kZeroBubble };

// "gpipe", "1f1b", "interleaved", "zero-bubble"; UserError naming the choices otherwise.
ScheduleKind parse_schedule_kind(const std::string& name);
std::string to_string(ScheduleKind kind);

enum class ActionKind {
  kForward, kBackward, kBackwardInput, kBackwardWeight,
  kSendActivation, kRecvActivation, kSendGradient, kRecvGradient,
};

struct Action {
  ActionKind kind;
  int microbatch;
  int stage;
  bool operator==(const Action&) const = default;
};

std::string to_string(const Action& action);  // "F3@s1", "recv-act 3@s1", ...

struct PipelineSchedule {
  ScheduleKind kind;
  int ranks = 1;           // p: the pipe axis
  int virtual_stages = 1;  // v: stages per rank
  int microbatches = 1;    // m
  std::vector<std::vector<Action>> actions;  // [rank] in execution order

  int num_stages() const { return ranks * virtual_stages; }
  int rank_of(int stage) const { return stage % ranks; }
};

// Throws UserError when the combination cannot be scheduled (m < p for interleaved,
// whose microbatches go in groups of p, say), naming the values and the fix.
PipelineSchedule make_pipeline_schedule(ScheduleKind kind, int ranks, int virtual_stages, int microbatches);

// What a backward(-input) pass starts beside on its rank.
struct BackwardMoment {
  int in_flight = 0;          // microbatches forwarded and not yet backward, its own included
  int awaiting_weight = 0;    // input-gradient passes whose weight pass is still to run (zero-bubble)
  bool gradients = false;     // a weight gradient of this step exists already on the rank
  auto operator<=>(const BackwardMoment&) const = default;
};

struct ScheduleCheck {
  double makespan = 0;                // simulated step time, in forward-pass units of one rank's whole model share
  double bubble = 0;                  // idle fraction of it: 1 - busy / makespan
  std::vector<int> peak_in_flight;    // [rank] most microbatches forwarded and not yet backward(-input)
  // [rank] what its backward(-input) passes start beside, each distinct moment once: the
  // memory estimate takes the largest (parallel/runtime/memory_estimate.h).
  std::vector<std::vector<BackwardMoment>> at_backward;
  std::vector<double> finish;         // [rank] when its last action ends
  std::vector<std::vector<double>> start;  // [rank][action] simulated start time
};

// Simulates the schedule; throws UserError naming the blocked ranks and their actions on
// a deadlock, and naming the action on a missing dependency or an unmatched message.
// `transfer`: each message's time from its send to its arrival, in the same units (0:
// free links); the bubble then includes the waits it causes.
ScheduleCheck check(const PipelineSchedule& schedule, double transfer = 0.0);

// The moments pipe rank `rank`'s backward passes start beside under `kind` (check()'s
// at_backward); without a pipe axis (ranks 1) one microbatch, after the earlier
// microbatches' gradients once there are several. What the memory estimates price.
std::vector<BackwardMoment> backward_moments(ScheduleKind kind, int ranks, int virtual_stages, int microbatches, int rank);

// The closed form the book gives for the schedule's bubble fraction (zero-bubble: ZB-H1's
// (p-1)(F+B-W) bubble with F = B = W).
double predicted_bubble(ScheduleKind kind, int ranks, int virtual_stages, int microbatches);

// The timeline as text, one row per rank, one column per simulated unit ("F3 " forward of
// microbatch 3, "B3 " backward, "b3"/"w3" the zero-bubble halves, "." idle), as
// --dry-run prints it.
std::string render_timeline(const PipelineSchedule& schedule, const ScheduleCheck& check);

}  // namespace shardlab::parallel
