#include "parallel/comm/link_emulation.h"

#include <algorithm>
#include <thread>

#include "framework/error.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/mesh.h"
#include "parallel/cost/network/collective.h"

namespace shardlab::parallel {

LinkMode parse_link_mode(const std::string& name) {
  if (name == "off") return LinkMode::kOff;
  if (name == "account") return LinkMode::kAccount;
  if (name == "delay") return LinkMode::kDelay;
  throw UserError("unknown link emulation mode '" + name + "'; choose off, account or delay");
}

std::string to_string(LinkMode mode) {
  switch (mode) {
    case LinkMode::kOff: return "off";
    case LinkMode::kAccount: return "account";
    case LinkMode::kDelay: return "delay";
  }
  return "?";
}

LinkEmulation::LinkEmulation(std::vector<std::string> axis_names) : axis_names_(std::move(axis_names)) {
  const cost::HardwareProfile& local = cost::hardware("local");
  for (const std::string& name : axis_names_) links_.push_back(local.link(name));
}

void LinkEmulation::configure(LinkMode mode, const cost::HardwareProfile& profile, double link_scale) {
  if (!(link_scale > 0)) {
    throw UserError("--link-scale " + std::to_string(link_scale) + " must be positive (1 = the profile's own links)");
  }
  mode_ = mode;
  link_scale_ = link_scale;
  busy_until_.clear();
  profile_name_ = profile.name;
  for (size_t i = 0; i < axis_names_.size(); ++i) links_[i] = profile.link(axis_names_[i]);
}

void LinkEmulation::set_axis_link(int axis, cost::LinkSpec link) { links_.at(axis) = link; }

double LinkEmulation::hop_seconds(int axis, int64_t bytes) const {
  const cost::LinkSpec& l = links_[axis];
  return link_scale_ * (l.latency + (l.bandwidth > 0 ? static_cast<double>(bytes) / l.bandwidth : 0.0));
}

double LinkEmulation::axis_seconds(CollectiveOp op, Algorithm algorithm, int axis, int n, bool wraparound,
                                   int64_t bytes, int shift) const {
  if (n == 1) return 0;
  // native is MPI's business: predict what the emulated hardware does (bidirectional).
  const bool bidirectional = algorithm != Algorithm::kRing;
  const cost::LinkSpec& l = links_[axis];
  const cost::LinkSpec scaled{l.bandwidth / link_scale_, l.latency * link_scale_};
  switch (op) {
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllReduce:
      return cost::collective_time(op, bytes, n, scaled, wraparound, bidirectional);
    case CollectiveOp::kAllToAll:  // the cost model counts the global array, the trace one rank's share
      return cost::collective_time(op, static_cast<double>(bytes) * n, n, scaled, wraparound, bidirectional);
    case CollectiveOp::kPermute: {
      // Store-and-forward of the whole buffer: the short way (bidir), forward (ring), or
      // on a line the longer of the two directions that run at once.
      const int forward = ((shift % n) + n) % n;
      if (forward == 0) return 0;
      const int hops = !wraparound ? std::max(forward, n - forward)
                       : bidirectional ? std::min(forward, n - forward)
                                       : forward;
      return hops * hop_seconds(axis, bytes);
    }
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv:
      return hop_seconds(axis, bytes);
  }
  return 0;
}

double LinkEmulation::predict_seconds(CollectiveOp op, Algorithm algorithm, const AxisGroup& group,
                                      int64_t bytes, int shift) const {
  // Multi-axis collectives run one axis after another (collectives.h): all_gather grows
  // the buffer innermost axis first, reduce_scatter shrinks it outermost first.
  double total = 0;
  const auto& axes = group.axes();
  if (op == CollectiveOp::kAllGather) {
    int64_t gathered = bytes / group.size();
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      gathered *= (*it)->size;
      total += axis_seconds(op, algorithm, (*it)->index, (*it)->size, (*it)->wraparound, gathered, shift);
    }
    return total;
  }
  int64_t remaining = bytes;
  for (const Axis* a : axes) {
    total += axis_seconds(op, algorithm, a->index, a->size, a->wraparound, remaining, shift);
    if (op == CollectiveOp::kReduceScatter) remaining /= a->size;
  }
  return total;
}

LinkEmulation::Clock::time_point LinkEmulation::reserve(std::span<const int> axes, Clock::time_point earliest,
                                                        double seconds) {
  const auto duration = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  if (mode_ != LinkMode::kDelay || seconds <= 0) return earliest + duration;
  busy_until_.resize(axis_names_.size());
  Clock::time_point start = earliest;
  for (int a : axes) start = std::max(start, busy_until_.at(a));
  const Clock::time_point end = start + duration;
  for (int a : axes) busy_until_[a] = end;
  return end;
}

void LinkEmulation::hold_until(Clock::time_point deadline) const {
  if (mode_ != LinkMode::kDelay) return;
  // Sleep most of the way (the cores are shared), then yield the last stretch for accuracy.
  constexpr auto kSpin = std::chrono::microseconds(200);
  auto now = Clock::now();
  if (deadline - now > kSpin) std::this_thread::sleep_for(deadline - now - kSpin);
  while (Clock::now() < deadline) std::this_thread::yield();
}

void configure_link_emulation(const Mesh& mesh, const std::string& profile, const std::string& mode,
                              double link_scale) {
  mesh.context().links.configure(parse_link_mode(mode), cost::hardware(profile), link_scale);
}

}  // namespace shardlab::parallel
