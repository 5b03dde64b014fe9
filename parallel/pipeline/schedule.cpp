#include "parallel/pipeline/schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "framework/error.h"

namespace shardlab::parallel {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool is_backward(ActionKind k) { return k == ActionKind::kBackward || k == ActionKind::kBackwardInput; }

// The compute actions of rank r, in order; communication is added around them after.
using Order = std::vector<Action>;

Action forward(int mb, int s) { return {ActionKind::kForward, mb, s}; }

Order gpipe(int p, int r, int m) {
  Order o;
  for (int mb = 0; mb < m; ++mb) o.push_back(forward(mb, r));
  for (int mb = 0; mb < m; ++mb) o.push_back({ActionKind::kBackward, mb, r});
  (void)p;
  return o;
}

// Megatron's 1F1B and its interleaved form: the k-th forward (and k-th backward) of a
// rank, microbatches taken in groups of p, each group through every local stage in turn
// (backwards from the last stage).
struct Interleaving {
  int p, v, r;
  int forward_stage(int k) const { return ((k % (p * v)) / p) * p + r; }
  int backward_stage(int k) const { return (v - 1 - (k % (p * v)) / p) * p + r; }
  int microbatch(int k) const { return (k / (p * v)) * p + k % p; }
};

Order one_f_one_b(int p, int v, int r, int m, ActionKind backward) {
  const Interleaving order{p, v, r};
  const int total = m * v;
  const int warmup = v == 1 ? std::min(p - r - 1, m) : std::min((p - r - 1) * 2 + (v - 1) * p, total);
  Order o;
  int f = 0, b = 0;
  const auto add_forward = [&] { o.push_back(forward(order.microbatch(f), order.forward_stage(f))); ++f; };
  const auto add_backward = [&] { o.push_back({backward, order.microbatch(b), order.backward_stage(b)}); ++b; };
  for (int i = 0; i < warmup; ++i) add_forward();
  while (f < total) {
    add_forward();
    add_backward();
  }
  while (b < total) add_backward();
  return o;
}

// ZB-H1: 1F1B with the backward split, rank r deferring each weight pass by r
// backward passes, so that the deferred ones fill the cool-down bubble of 1F1B while the
// in-flight activations stay those of 1F1B.
Order zero_bubble(int p, int r, int m) {
  Order o;
  const int delay = r;
  int w = 0;
  for (const Action& a : one_f_one_b(p, 1, r, m, ActionKind::kBackwardInput)) {
    o.push_back(a);
    if (a.kind == ActionKind::kBackwardInput && a.microbatch >= delay) {
      o.push_back({ActionKind::kBackwardWeight, w++, r});
    }
  }
  while (w < m) o.push_back({ActionKind::kBackwardWeight, w++, r});
  return o;
}

// Receives before the compute that needs them, sends right after the compute that makes them.
std::vector<Action> with_communication(const Order& order, int stages) {
  std::vector<Action> out;
  for (const Action& a : order) {
    if (a.kind == ActionKind::kForward && a.stage > 0) out.push_back({ActionKind::kRecvActivation, a.microbatch, a.stage});
    if (is_backward(a.kind) && a.stage < stages - 1) out.push_back({ActionKind::kRecvGradient, a.microbatch, a.stage});
    out.push_back(a);
    if (a.kind == ActionKind::kForward && a.stage < stages - 1) out.push_back({ActionKind::kSendActivation, a.microbatch, a.stage});
    if (is_backward(a.kind) && a.stage > 0) out.push_back({ActionKind::kSendGradient, a.microbatch, a.stage});
  }
  return out;
}

double cost(const Action& a, int v) {
  switch (a.kind) {
    case ActionKind::kForward: return 1.0 / v;
    case ActionKind::kBackward: return 2.0 / v;
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight: return 1.0 / v;
    default: return 0.0;
  }
}

}  // namespace

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  if (name == "interleaved") return ScheduleKind::kInterleaved;
  if (name == "zero-bubble") return ScheduleKind::kZeroBubble;
  throw UserError("pipeline schedule '" + name + "' is not one of gpipe, 1f1b, interleaved, zero-bubble");
}

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::k1F1B: return "1f1b";
    case ScheduleKind::kInterleaved: return "interleaved";
    case ScheduleKind::kZeroBubble: return "zero-bubble";
  }
  return "?";
}

std::string to_string(const Action& a) {
  static const char* names[] = {"F", "B", "BI", "BW", "send-act ", "recv-act ", "send-grad ", "recv-grad "};
  return names[static_cast<int>(a.kind)] + str(a.microbatch) + "@s" + str(a.stage);
}

PipelineSchedule make_pipeline_schedule(ScheduleKind kind, int p, int v, int m) {
  if (p < 1 || v < 1 || m < 1) {
    throw UserError("a pipeline needs at least 1 rank, 1 virtual stage and 1 microbatch; got pipe=" + str(p) +
                    ", virtual stages " + str(v) + ", microbatches " + str(m));
  }
  if (kind != ScheduleKind::kInterleaved && v != 1) {
    throw UserError("virtual stages (" + str(v) + ") need the interleaved schedule, not " + to_string(kind) +
                    "; use --pp-schedule interleaved or --pp-virtual 1");
  }
  if (kind == ScheduleKind::kInterleaved && m % p != 0) {
    throw UserError("the interleaved schedule takes microbatches in groups of the pipe size " + str(p) + ", but got " +
                    str(m) + " microbatches; use --grad-accum a multiple of " + str(p));
  }
  PipelineSchedule s{kind, p, v, m, {}};
  for (int r = 0; r < p; ++r) {
    Order order;
    switch (kind) {
      case ScheduleKind::kGPipe: order = gpipe(p, r, m); break;
      case ScheduleKind::k1F1B:
      case ScheduleKind::kInterleaved: order = one_f_one_b(p, v, r, m, ActionKind::kBackward); break;
      case ScheduleKind::kZeroBubble: order = zero_bubble(p, r, m); break;
    }
    s.actions.push_back(with_communication(order, s.num_stages()));
  }
  return s;
}

ScheduleCheck check(const PipelineSchedule& s, double transfer) {
  const int p = s.ranks, S = s.num_stages(), m = s.microbatches;
  if (static_cast<int>(s.actions.size()) != p) throw UserError("schedule has " + str(s.actions.size()) + " rank lists for pipe=" + str(p));
  ScheduleCheck c;
  c.peak_in_flight.assign(p, 0);
  c.at_backward.resize(p);
  std::vector<int> awaiting_weight(p, 0);
  std::vector<bool> gradients(p, false);
  c.finish.assign(p, 0.0);
  c.start.resize(p);
  // A message in flight: (is gradient, microbatch, receiving stage) -> time it arrives.
  std::map<std::tuple<bool, int, int>, double> messages;
  std::set<std::tuple<ActionKind, int, int>> done;  // compute and receives performed
  std::vector<size_t> next(p, 0);
  std::vector<int> in_flight(p, 0);
  const auto fail = [&](int r, const Action& a, const std::string& why) {
    throw UserError("pipeline schedule " + to_string(s.kind) + ": rank " + str(r) + "'s action " + str(next[r]) + " (" +
                    to_string(a) + ") " + why);
  };
  const auto has = [&](ActionKind k, int mb, int stage) { return done.count({k, mb, stage}) > 0; };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      while (next[r] < s.actions[r].size()) {
        const Action& a = s.actions[r][next[r]];
        if (a.microbatch < 0 || a.microbatch >= m || a.stage < 0 || a.stage >= S || s.rank_of(a.stage) != r) {
          fail(r, a, "names a microbatch or a stage this rank does not hold");
        }
        double& t = c.finish[r];
        bool blocked = false;
        switch (a.kind) {
          case ActionKind::kRecvActivation:
          case ActionKind::kRecvGradient: {
            const bool grad = a.kind == ActionKind::kRecvGradient;
            const auto it = messages.find({grad, a.microbatch, a.stage});
            if (it == messages.end()) {
              blocked = true;  // until its sender gets there
              break;
            }
            t = std::max(t, it->second);
            messages.erase(it);
            break;
          }
          case ActionKind::kSendActivation:
            if (a.stage == S - 1 || !has(ActionKind::kForward, a.microbatch, a.stage)) fail(r, a, "sends an activation not computed");
            if (!messages.emplace(std::tuple{false, a.microbatch, a.stage + 1}, t + transfer).second) fail(r, a, "is sent twice");
            break;
          case ActionKind::kSendGradient:
            if (a.stage == 0 || !(has(ActionKind::kBackward, a.microbatch, a.stage) ||
                                  has(ActionKind::kBackwardInput, a.microbatch, a.stage))) {
              fail(r, a, "sends a gradient not computed");
            }
            if (!messages.emplace(std::tuple{true, a.microbatch, a.stage - 1}, t + transfer).second) fail(r, a, "is sent twice");
            break;
          case ActionKind::kForward:
            if (a.stage > 0 && !has(ActionKind::kRecvActivation, a.microbatch, a.stage)) fail(r, a, "runs before its input arrived");
            ++in_flight[r];
            break;
          case ActionKind::kBackward:
          case ActionKind::kBackwardInput:
            if (!has(ActionKind::kForward, a.microbatch, a.stage)) fail(r, a, "runs before its forward");
            if (a.stage < S - 1 && !has(ActionKind::kRecvGradient, a.microbatch, a.stage)) fail(r, a, "runs before its output gradient arrived");
            if (const BackwardMoment moment{in_flight[r], awaiting_weight[r], gradients[r]};
                std::find(c.at_backward[r].begin(), c.at_backward[r].end(), moment) == c.at_backward[r].end()) {
              c.at_backward[r].push_back(moment);
            }
            --in_flight[r];
            if (a.kind == ActionKind::kBackward) gradients[r] = true;
            else ++awaiting_weight[r];
            break;
          case ActionKind::kBackwardWeight:
            if (!has(ActionKind::kBackwardInput, a.microbatch, a.stage)) fail(r, a, "runs before its input-gradient pass");
            --awaiting_weight[r];
            gradients[r] = true;
            break;
        }
        if (blocked) break;
        if (!done.insert({a.kind, a.microbatch, a.stage}).second) fail(r, a, "is performed twice");
        c.start[r].push_back(t);
        t += cost(a, s.virtual_stages);
        c.peak_in_flight[r] = std::max(c.peak_in_flight[r], in_flight[r]);
        ++next[r];
        progress = true;
      }
    }
  }
  std::string blocked;
  for (int r = 0; r < p; ++r) {
    if (next[r] < s.actions[r].size()) blocked += " rank " + str(r) + " at " + to_string(s.actions[r][next[r]]) + ";";
  }
  if (!blocked.empty()) {
    throw UserError("pipeline schedule " + to_string(s.kind) + " deadlocks: every unfinished rank waits on a receive "
                    "whose send comes later --" + blocked);
  }
  if (!messages.empty()) throw UserError("pipeline schedule " + to_string(s.kind) + ": a message is sent and never received");
  for (int r = 0; r < p; ++r) {
    for (int stage = r; stage < S; stage += p) {
      for (int mb = 0; mb < m; ++mb) {
        const bool back = has(ActionKind::kBackward, mb, stage) ||
                          (has(ActionKind::kBackwardInput, mb, stage) && has(ActionKind::kBackwardWeight, mb, stage));
        if (!has(ActionKind::kForward, mb, stage) || !back) {
          throw UserError("pipeline schedule " + to_string(s.kind) + ": rank " + str(r) + " never finishes microbatch " +
                          str(mb) + " on stage " + str(stage));
        }
      }
    }
  }
  c.makespan = *std::max_element(c.finish.begin(), c.finish.end());
  const double busy = 3.0 * m;  // every rank: m microbatches x (forward 1 + backward 2) over its stages
  c.bubble = c.makespan > 0 ? 1.0 - busy / c.makespan : 0.0;
  return c;
}

double predicted_bubble(ScheduleKind kind, int p, int v, int m) {
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::k1F1B: return static_cast<double>(p - 1) / (m + p - 1);
    case ScheduleKind::kInterleaved: return static_cast<double>(p - 1) / (static_cast<double>(v) * m + p - 1);
    case ScheduleKind::kZeroBubble: return static_cast<double>(p - 1) / (3.0 * m + p - 1);
  }
  return 0.0;
}

std::string render_timeline(const PipelineSchedule& s, const ScheduleCheck& c) {
  constexpr size_t kCell = 4;  // characters per time unit of one stage's forward
  const int v = s.virtual_stages;
  const auto column = [&](double t) { return static_cast<size_t>(std::lround(t * v)); };
  std::string out;
  for (int r = 0; r < s.ranks; ++r) {
    std::string row(column(c.makespan) * kCell, ' ');
    for (size_t col = 0; col < column(c.makespan); ++col) row[col * kCell + 1] = '.';
    for (size_t i = 0; i < s.actions[r].size(); ++i) {
      const Action& a = s.actions[r][i];
      const size_t width = column(cost(a, v));
      if (width == 0) continue;
      static const char* marks[] = {"F", "B", "b", "w"};
      std::string label = marks[static_cast<int>(a.kind)] + str(a.microbatch);
      if (v > 1) label += static_cast<char>('a' + a.stage / s.ranks);
      label.resize(width * kCell, ' ');
      row.replace(column(c.start[r][i]) * kCell, label.size(), label);
    }
    out += "rank " + str(r) + " |" + row + "|\n";
  }
  return out;
}

std::vector<BackwardMoment> backward_moments(ScheduleKind kind, int ranks, int virtual_stages, int microbatches, int rank) {
  if (ranks <= 1) return {{.in_flight = 1, .gradients = microbatches > 1}};
  return check(make_pipeline_schedule(kind, ranks, virtual_stages, microbatches)).at_backward[rank];
}

}  // namespace shardlab::parallel
