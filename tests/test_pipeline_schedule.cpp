// Pipeline schedules as data: every generated schedule passes the checker with the
// book's bubble, and the checker rejects lists that would deadlock or lose a message.
#include <doctest/doctest.h>

#include <algorithm>

#include "framework/error.h"
#include "parallel/pipeline/schedule.h"

using namespace shardlab;
using namespace shardlab::parallel;

TEST_CASE("every generated schedule is deadlock-free with the closed-form bubble") {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved,
                            ScheduleKind::kZeroBubble}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int v : {1, 2, 3, 4}) {
        if (v > 1 && kind != ScheduleKind::kInterleaved) continue;
        for (int m : {1, 2, 4, 8, 16, 32}) {
          if (kind == ScheduleKind::kInterleaved && m % p != 0) continue;
          CAPTURE(to_string(kind)); CAPTURE(p); CAPTURE(v); CAPTURE(m);
          const PipelineSchedule s = make_pipeline_schedule(kind, p, v, m);
          const ScheduleCheck c = check(s);
          // Interleaving and the zero-bubble weight passes fill the bubble only once there
          // are as many microbatches as ranks; below that the closed forms do not hold.
          if ((kind != ScheduleKind::kInterleaved && kind != ScheduleKind::kZeroBubble) || m >= p) {
            CHECK(c.bubble == doctest::Approx(predicted_bubble(kind, p, v, m)).epsilon(1e-9));
          }
          if (kind == ScheduleKind::kZeroBubble) {
            CHECK(c.bubble <= check(make_pipeline_schedule(ScheduleKind::k1F1B, p, 1, m)).bubble + 1e-12);
          }
          const int peak = *std::max_element(c.peak_in_flight.begin(), c.peak_in_flight.end());
          if (kind == ScheduleKind::kGPipe) CHECK(peak == m);
          if (kind == ScheduleKind::k1F1B || kind == ScheduleKind::kZeroBubble) {
            CHECK(peak == std::min(p, m));  // rank 0 holds p microbatches, the last rank 1
            CHECK(c.peak_in_flight[p - 1] == 1);
          }
        }
      }
    }
  }
}

// What the memory estimate reads: a rank's first backward starts before any weight gradient
// exists, beside all its microbatches in flight; under zero-bubble rank r holds back its
// first r weight passes, so the last rank's later input-gradient passes start beside
// weight passes still waiting.
TEST_CASE("the moments each backward starts beside: microbatches in flight, waiting weight passes, gradients") {
  for (int p : {2, 4}) {
    for (int m : {2, 4, 8}) {
      CAPTURE(p); CAPTURE(m);
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kZeroBubble}) {
        CAPTURE(to_string(kind));
        const ScheduleCheck c = check(make_pipeline_schedule(kind, p, 1, m));
        for (int r = 0; r < p; ++r) {
          REQUIRE_FALSE(c.at_backward[r].empty());
          const BackwardMoment& first = c.at_backward[r].front();
          CHECK(first.in_flight == c.peak_in_flight[r]);
          CHECK_FALSE(first.gradients);
          CHECK(first.awaiting_weight == 0);
          int waiting = 0;
          for (const BackwardMoment& b : c.at_backward[r]) {
            CHECK(b.in_flight >= 1);
            waiting = std::max(waiting, b.awaiting_weight);
          }
          if (kind != ScheduleKind::kZeroBubble) CHECK(waiting == 0);
        }
        const auto waits = [](const std::vector<BackwardMoment>& moments) {
          return std::any_of(moments.begin(), moments.end(), [](const BackwardMoment& b) { return b.awaiting_weight > 0; });
        };
        CHECK_FALSE(waits(c.at_backward[0]));
        if (kind == ScheduleKind::kZeroBubble) CHECK(waits(c.at_backward[p - 1]));
      }
    }
  }
}

TEST_CASE("the book's bubble: (p-1)/(m+p-1), divided by v interleaved, a third of it zero-bubble") {
  CHECK(predicted_bubble(ScheduleKind::k1F1B, 4, 1, 8) == doctest::Approx(3.0 / 11));
  CHECK(predicted_bubble(ScheduleKind::kInterleaved, 4, 2, 8) == doctest::Approx(3.0 / 19));
  CHECK(check(make_pipeline_schedule(ScheduleKind::kZeroBubble, 4, 1, 8)).bubble <
        check(make_pipeline_schedule(ScheduleKind::k1F1B, 4, 1, 8)).bubble / 2);
}

TEST_CASE("the checker rejects a mis-ordered schedule as a deadlock, naming the ranks") {
  // Rank 0 waits for microbatch 0's gradient before sending microbatch 1's activation;
  // rank 1 wants both activations before its first backward: each waits on the other.
  using K = ActionKind;
  PipelineSchedule s{ScheduleKind::k1F1B, 2, 1, 2, {}};
  s.actions.push_back({{K::kForward, 0, 0}, {K::kSendActivation, 0, 0}, {K::kRecvGradient, 0, 0}, {K::kBackward, 0, 0},
                       {K::kForward, 1, 0}, {K::kSendActivation, 1, 0}, {K::kRecvGradient, 1, 0}, {K::kBackward, 1, 0}});
  s.actions.push_back({{K::kRecvActivation, 0, 1}, {K::kForward, 0, 1}, {K::kRecvActivation, 1, 1}, {K::kForward, 1, 1},
                       {K::kBackward, 0, 1}, {K::kSendGradient, 0, 1}, {K::kBackward, 1, 1}, {K::kSendGradient, 1, 1}});
  CHECK_THROWS_WITH_AS(check(s), doctest::Contains("deadlocks"), UserError);
  CHECK_THROWS_WITH_AS(check(s), doctest::Contains("rank 0 at recv-grad 0@s0; rank 1 at recv-act 1@s1"), UserError);
  // The same actions in 1F1B's order run.
  CHECK_NOTHROW(check(make_pipeline_schedule(ScheduleKind::k1F1B, 2, 1, 2)));
}

TEST_CASE("the checker rejects unmatched messages and missing dependencies") {
  PipelineSchedule s = make_pipeline_schedule(ScheduleKind::kGPipe, 2, 1, 2);
  auto dropped = s;
  auto& first = dropped.actions[0];
  first.erase(std::find(first.begin(), first.end(), Action{ActionKind::kSendActivation, 1, 0}));
  CHECK_THROWS_WITH_AS(check(dropped), doctest::Contains("deadlocks"), UserError);
  auto early = s;
  auto& last = early.actions[1];
  last.erase(std::find(last.begin(), last.end(), Action{ActionKind::kRecvActivation, 0, 1}));
  CHECK_THROWS_WITH_AS(check(early), doctest::Contains("F0@s1) runs before its input arrived"), UserError);
  auto twice = s;
  twice.actions[0].push_back(Action{ActionKind::kForward, 0, 0});
  CHECK_THROWS_WITH_AS(check(twice), doctest::Contains("is performed twice"), UserError);
}

TEST_CASE("invalid combinations are clear errors") {
  CHECK_THROWS_WITH_AS(make_pipeline_schedule(ScheduleKind::kInterleaved, 4, 2, 6),
                       doctest::Contains("--grad-accum a multiple of 4"), UserError);
  CHECK_THROWS_WITH_AS(make_pipeline_schedule(ScheduleKind::k1F1B, 2, 2, 4), doctest::Contains("interleaved"), UserError);
  CHECK_THROWS_WITH_AS(parse_schedule_kind("dualpipe"), doctest::Contains("gpipe, 1f1b, interleaved, zero-bubble"),
                       UserError);
}

TEST_CASE("the timeline shows the 1F1B picture") {
  const PipelineSchedule s = make_pipeline_schedule(ScheduleKind::k1F1B, 2, 1, 2);
  const std::string t = render_timeline(s, check(s));
  CHECK(t == "rank 0 |F0  F1   .   .  B0       .  B1      |\n"
             "rank 1 | .  F0  B0      F1  B1       .   .  |\n");
}
