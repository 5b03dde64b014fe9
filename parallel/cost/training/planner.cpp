#include "parallel/cost/training/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

std::string fixed(double value, int digits = 3) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
  return buffer;
}

// The microbatch count that serves this layout best: fewest that fit, and for pipelines
// the one with the fastest step (more microbatches shrink the bubble).
bool best_microbatches(const TrainConfig& c, Layout layout, const HardwareProfile& hw, StepEstimate& best,
                       std::string& problem) {
  bool found = false;
  for (int mb = 1; mb <= 1024; mb *= 2) {
    layout.microbatches = mb;
    const std::string why = layout_problem(c, layout);
    if (!why.empty()) {  // interleaved takes microbatches in groups of the pipe size: try more
      if (mb == 1) problem = why;
      continue;
    }
    const StepEstimate e = estimate_train_step(c, layout, hw);
    const bool better = !found || (e.fits && !best.fits) ||
                        (e.fits == best.fits && (e.fits ? e.step_seconds < best.step_seconds * 0.999
                                                        : e.memory.total() < best.memory.total()));
    if (better) best = e, found = true;
    if (layout.pipe == 1 && e.fits) break;  // without a pipeline, more microbatches only add latency
  }
  return found;
}

std::string verdict(const StepEstimate& e, const StepEstimate& best, const HardwareProfile& hw) {
  const double gb = 1e9;
  if (!e.fits)
    return "does not fit: " + fixed(e.memory.total() / gb) + " GB per chip > " + fixed(hw.hbm_bytes / gb) +
           " GB (params " + fixed(e.memory.params / gb) + ", grads " + fixed(e.memory.grads / gb) + ", optimizer " +
           fixed(e.memory.optimizer / gb) + ", activations " + fixed(e.memory.activations / gb) + ")";
  if (!e.compute_bound)
    return "communication-bound: " + e.bottleneck + " traffic " + fixed(e.comm_seconds) + " s > compute " +
           fixed(e.compute_seconds) + " s";
  if (e.bubble_fraction > 0.05)
    return "pipeline bubble idles the chips " + fixed(100 * e.bubble_fraction, 2) + "% of the step";
  if (e.step_seconds > best.step_seconds * 1.001) {
    // The step is compute plus the communication that does not hide behind it: the two
    // parts say which one costs this layout its place (the total traffic alone does not).
    const auto ms = [](double seconds) { return fixed(1e3 * seconds); };
    const auto exposed = [](const StepEstimate& x) { return std::max(0.0, x.step_seconds - x.compute_seconds); };
    return "slower by " + fixed(100 * (e.step_seconds / best.step_seconds - 1), 2) + "% (compute " +
           ms(e.compute_seconds) + " vs " + ms(best.compute_seconds) + " ms; exposed communication " +
           ms(exposed(e)) + " of " + ms(e.comm_seconds) + " ms vs " + ms(exposed(best)) + " of " +
           ms(best.comm_seconds) + " ms)";
  }
  return "ties the best; uses more memory per chip (" + fixed(e.memory.total() / gb) + " GB vs " +
         fixed(best.memory.total() / gb) + " GB)";
}

// "int8 gathers", "bf16 gradient reductions and int8 gathers": what `to` changes from `from`.
std::string wire_change(const WireDtypes& from, const WireDtypes& to) {
  std::string what;
  if (to.reduce != from.reduce) what = to_string(to.reduce) + " gradient reductions";
  if (to.gather != from.gather) what += (what.empty() ? "" : " and ") + to_string(to.gather) + " gathers";
  return what;
}

std::string wire_flags(const WireDtypes& from, const WireDtypes& to) {
  std::string flags;
  if (to.reduce != from.reduce) flags = "--reduce-dtype " + to_string(to.reduce);
  if (to.gather != from.gather) flags += (flags.empty() ? "" : " ") + std::string("--gather-dtype ") + to_string(to.gather);
  return flags;
}

// On CPU ranks (TrainConfig::cpu_step) what train_gpt chooses beside the mesh is a
// candidate of its own: ZeRO-1 and ZeRO-2 over a data axis (not beside an fsdp or
// context axis: those shard the state as ZeRO-3), sequence parallelism on a dense model's
// tensor axis, and every pipeline schedule (interleaved with 2 virtual stages).
std::vector<Layout> variants_of(const TrainConfig& c, const Layout& base) {
  if (!c.cpu_step) return {base};
  using parallel::ScheduleKind;
  const std::vector<int> zeros = base.data > 1 && base.fsdp * base.context == 1 ? std::vector{0, 1, 2} : std::vector{0};
  const std::vector<bool> sps = base.tensor > 1 && c.model.experts == 0 ? std::vector{false, true} : std::vector{false};
  const std::vector<std::pair<ScheduleKind, int>> schedules =
      base.pipe > 1 ? std::vector<std::pair<ScheduleKind, int>>{{ScheduleKind::k1F1B, 1},
                                                                {ScheduleKind::kGPipe, 1},
                                                                {ScheduleKind::kInterleaved, 2},
                                                                {ScheduleKind::kZeroBubble, 1}}
                    : std::vector<std::pair<ScheduleKind, int>>{{ScheduleKind::k1F1B, 1}};
  std::vector<Layout> out;
  for (int zero : zeros)
    for (bool sp : sps)
      for (const auto& [schedule, virtual_stages] : schedules) {
        Layout l = base;
        l.zero = zero, l.sequence_parallel = sp, l.schedule = schedule, l.virtual_stages = virtual_stages;
        out.push_back(l);
      }
  return out;
}

}  // namespace

std::optional<WireAdvice> wire_advice(const TrainConfig& c, const StepEstimate& e, const HardwareProfile& hw) {
  if (e.compute_bound) return std::nullopt;
  const WireDtypes now = c.precision.wire;
  // Every pair of wires no wider than the config's, least compressed (most bytes per value) first.
  std::vector<WireDtypes> narrower;
  for (DType reduce : wire_dtypes())
    for (DType gather : wire_dtypes())
      if (wire_bytes_per_value(reduce) <= wire_bytes_per_value(now.reduce) &&
          wire_bytes_per_value(gather) <= wire_bytes_per_value(now.gather) &&
          (reduce != now.reduce || gather != now.gather))
        narrower.push_back({reduce, gather});
  auto bytes = [](const WireDtypes& w) { return wire_bytes_per_value(w.reduce) + wire_bytes_per_value(w.gather); };
  std::stable_sort(narrower.begin(), narrower.end(),
                   [&](const WireDtypes& a, const WireDtypes& b) { return bytes(a) > bytes(b); });
  std::optional<WireAdvice> best;
  for (const WireDtypes& wire : narrower) {
    TrainConfig compressed = c;
    compressed.precision.wire = wire;
    const StepEstimate s = estimate_train_step(compressed, e.layout, hw);
    if (!(s.step_seconds < e.step_seconds * 0.999)) continue;
    if (!best || (s.compute_bound && !best->estimate.compute_bound) ||
        (!best->estimate.compute_bound && s.step_seconds < best->estimate.step_seconds * (1 - 1e-9)))
      best = WireAdvice{wire, s, "", ""};
  }
  if (!best) return std::nullopt;
  best->flags = wire_flags(now, best->wire);
  best->reason = wire_change(now, best->wire) + " would cut the step from " + fixed(e.step_seconds) + " s to " + fixed(best->estimate.step_seconds) +
                 " s" + (best->estimate.compute_bound ? ", compute-bound" : "") + " (" + best->flags + ")";
  return best;
}

Plan plan_training(const TrainConfig& c, int chips, const HardwareProfile& hw) {
  if (chips < 1) throw UserError("--chips must be at least 1, got " + std::to_string(chips));
  c.model.validate();
  if (c.batch_tokens <= 0) throw UserError("batch must be a positive number of tokens");
  Plan plan;
  const std::vector<int> sizes = divisors(chips);
  const bool moe = c.model.experts > 0;
  // A context axis only where folding it into the batch axes would not split the batch's
  // sequences evenly (the book shards the sequence once they run out; an odd factor of the
  // chip count, 9 of 72, needs it too); for train_gpt always, since on a machine's RAM it
  // is the axis that divides a long sequence's activations (layout_problem skips what
  // train_gpt refuses).
  const double sequences = c.batch_tokens / static_cast<double>(c.model.context);
  auto consider = [&](const Layout& layout) {
    StepEstimate estimate;
    std::string problem;
    if (best_microbatches(c, layout, hw, estimate, problem)) {
      plan.ranked.push_back({estimate, "", std::nullopt});
    } else {
      ++plan.skipped[problem];
    }
  };
  for (int tensor : sizes)
    for (int pipe : sizes) {
      if (chips % (static_cast<int64_t>(tensor) * pipe) != 0) continue;
      for (int expert : sizes) {
        const int64_t model = static_cast<int64_t>(tensor) * pipe * expert;
        if (chips % model != 0 || (!moe && expert > 1)) continue;
        for (int context : sizes) {
          if (chips % (model * context) != 0) continue;
          for (int fsdp : sizes) {
            const int64_t inner = model * context * fsdp;
            if (chips % inner != 0) continue;
            const int data = chips / static_cast<int>(inner);
            const double batch_ways = static_cast<double>(data) * fsdp * expert * context;
            const bool needed = std::fmod(sequences, batch_ways) != 0;
            if (context > 1 && !c.shardlab_activations && !needed) continue;
            for (const Layout& layout : variants_of(c, Layout{data, fsdp, context, pipe, expert, tensor, 1}))
              consider(layout);
          }
        }
      }
    }
  std::stable_sort(plan.ranked.begin(), plan.ranked.end(), [](const PlanEntry& a, const PlanEntry& b) {
    if (a.estimate.fits != b.estimate.fits) return a.estimate.fits;
    if (a.estimate.fits && a.estimate.step_seconds != b.estimate.step_seconds)
      return a.estimate.step_seconds < b.estimate.step_seconds;
    return a.estimate.memory.total() < b.estimate.memory.total();
  });
  for (PlanEntry& entry : plan.ranked) {
    plan.feasible += entry.estimate.fits;
    entry.verdict = &entry == &plan.ranked.front() && entry.estimate.fits
                        ? "best"
                        : verdict(entry.estimate, plan.ranked.front().estimate, hw);
    if (entry.estimate.fits) entry.compression = wire_advice(c, entry.estimate, hw);
    if (entry.compression)  // a communication-bound verdict names the axis already
      entry.verdict += (entry.estimate.compute_bound || entry.verdict.starts_with("communication-bound")
                            ? "; "
                            : "; communication-bound on " + entry.estimate.bottleneck + ": ") +
                       entry.compression->reason;
  }
  return plan;
}

}  // namespace shardlab::cost
