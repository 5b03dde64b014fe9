// Link emulation: make each mesh axis behave like a link of a hardware profile (docs/collectives.md).
//
// Every axis carries a cost::LinkSpec {bandwidth, latency} taken from a hardware profile
// (profile.link(axis name): the book's ICI figures, or `local` as measured) and a scale
// factor. One neighbour transfer of b bytes then takes
//     hop_seconds = link_scale * (latency + b / bandwidth).
// link_scale keeps the target chip's compute-to-bandwidth ratio on a slower CPU: a CPU
// 1000x slower than a TPU at matmuls should see links 1000x slower, link_scale = 1000.
//
// Modes:
//   off      measure this cluster as it is (predictions are still recorded);
//   account  also record, per collective, the time its hops would take on the emulated
//            links (CommRecord::emulated) beside the measured time;
//   delay    hold every neighbour transfer until the emulated link would have finished
//            it, so wall-clock time follows the emulated interconnect. Native collectives,
//            whose hops MPI hides, are held for their predicted time as a whole.
//            Transfers on one axis share its links: one issued while another still
//            occupies them starts when it ends (e.g. the gradient buckets of data
//            parallelism queue, as they do on real wires).
//
//   mesh.context().links.configure(LinkMode::kDelay, cost::hardware("tpu-v5e"), 1000.0);
//
// predict_seconds() asks the cost model (cost::collective_time, the book's ring/torus
// formulas) for each axis the collective runs on -- unidirectional for ring, bidirectional
// otherwise, a line where the axis has no wraparound -- with the scaled links, and sums
// the per-axis steps of a multi-axis collective. ppermute and send/recv, which the cost
// model does not cover, are hops x hop_seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "parallel/comm/collective_types.h"
#include "parallel/cost/hardware/hardware.h"

namespace shardlab::parallel {

class AxisGroup;
class Mesh;

enum class LinkMode { kOff, kAccount, kDelay };
LinkMode parse_link_mode(const std::string& name);  // "off" | "account" | "delay"
std::string to_string(LinkMode mode);

class LinkEmulation {
 public:
  using Clock = std::chrono::steady_clock;

  // Mode off; every axis gets the `local` profile's link for its name.
  explicit LinkEmulation(std::vector<std::string> axis_names);

  // Sets mode and scale and takes every axis's link from `profile` (profile.link(name)).
  void configure(LinkMode mode, const cost::HardwareProfile& profile, double link_scale = 1.0);
  void set_axis_link(int axis, cost::LinkSpec link);  // override one axis (e.g. a DCN axis)

  LinkMode mode() const { return mode_; }
  double link_scale() const { return link_scale_; }
  const std::string& profile_name() const { return profile_name_; }
  const cost::LinkSpec& link(int axis) const { return links_.at(axis); }

  // Emulated seconds of one neighbour transfer of `bytes` on mesh axis `axis`.
  double hop_seconds(int axis, int64_t bytes) const;

  // Predicted seconds of a whole collective on the emulated links. `bytes` is the
  // collective's size as the trace counts it (collectives.h).
  double predict_seconds(CollectiveOp op, Algorithm algorithm, const AxisGroup& group, int64_t bytes,
                         int shift = 1) const;

  // Books the links of `axes` for `seconds` of transfer from `earliest` or, in delay mode,
  // from when the last transfer already booked on any of them ends; returns when this
  // one ends. The deadline to hold a collective (or ring step) to. Zero seconds books nothing.
  Clock::time_point reserve(std::span<const int> axes, Clock::time_point earliest, double seconds);
  // In delay mode, sleeps until `deadline`; otherwise returns at once.
  void hold_until(Clock::time_point deadline) const;

 private:
  double axis_seconds(CollectiveOp op, Algorithm algorithm, int axis, int size, bool wraparound,
                      int64_t bytes, int shift) const;

  std::vector<std::string> axis_names_;
  std::vector<cost::LinkSpec> links_;
  std::string profile_name_ = "local";
  LinkMode mode_ = LinkMode::kOff;
  double link_scale_ = 1.0;
  std::vector<Clock::time_point> busy_until_;  // per axis: when its booked transfers end
};

// What a command line's --link-profile NAME --link-mode off|account|delay --link-scale X
// set up: every axis of `mesh` takes its link from hardware profile `profile` (cost::
// hardware names; "local" reads the calibrated file, parallel/cost/hardware/hardware.h). Throws UserError on an
// unknown profile or mode or a scale <= 0, identically on every rank.
//   configure_link_emulation(mesh, "tpu-v5e", "delay", 1000.0);
void configure_link_emulation(const Mesh& mesh, const std::string& profile, const std::string& mode,
                              double link_scale = 1.0);

}  // namespace shardlab::parallel
