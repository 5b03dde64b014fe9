#include "parallel/comm/ring_algorithms.h"

#include <algorithm>

#include "framework/error.h"
#include "parallel/comm/comm_context.h"

namespace shardlab::parallel {
namespace {

constexpr int kTagsPerCollective = 2;  // one per direction
constexpr int kTagCycle = 1 << 20;
// reduce_scatter steps travel in parts of this many floats (256 KiB: two of OpenMPI's
// TCP fragments, well inside a socket buffer), so that adding one part overlaps the
// transfer of the next.
constexpr int64_t kReduceSegmentFloats = int64_t{1} << 16;

enum class Part { kWhole, kFirstHalf, kSecondHalf };

// One direction of travel round an axis and the part of each chunk that travels it.
struct Pass {
  int dir;
  Part part;
  int tag;
};

// A torus ring goes one way (ring) or both ways with half chunks (bidir); a line always
// goes both ways with whole chunks, since its ends have only one neighbour.
std::vector<Pass> passes_for(const Axis& axis, bool bidir, int tag) {
  if (!axis.wraparound) return {{+1, Part::kWhole, tag}, {-1, Part::kWhole, tag + 1}};
  if (bidir) return {{+1, Part::kFirstHalf, tag}, {-1, Part::kSecondHalf, tag + 1}};
  return {{+1, Part::kWhole, tag}};
}

// The coordinate `hops` steps from this rank in direction `dir` (negative hops: against
// it): wrapped on a torus, -1 past the end of a line.
int walk(const Axis& axis, int dir, int hops) {
  int c = axis.coord + dir * hops;
  if (axis.wraparound) return ((c % axis.size) + axis.size) % axis.size;
  return c >= 0 && c < axis.size ? c : -1;
}

struct Range {
  int64_t begin;
  int64_t count;
};

// Chunk c of `total` elements cut into n near-equal chunks, or one half of it.
Range chunk_range(int64_t total, int n, int c, Part part) {
  const int64_t b = total * c / n, e = total * (c + 1) / n, mid = b + (e - b) / 2;
  switch (part) {
    case Part::kWhole: return {b, e - b};
    case Part::kFirstHalf: return {b, mid - b};
    case Part::kSecondHalf: return {mid, e - mid};
  }
  return {b, 0};
}

// Appends `count` empty steps on `axis` and returns the index of the first.
size_t add_steps(Schedule& s, const Axis& axis, int count) {
  const size_t first = s.steps.size();
  for (int i = 0; i < count; ++i) {
    Step& step = s.steps.emplace_back();
    step.comm = axis.comm.get();
    step.axis = axis.index;
  }
  return first;
}

std::vector<const Axis*> active_axes(const AxisGroup& group) {
  std::vector<const Axis*> axes;
  for (const Axis* a : group.axes()) {
    if (a->size > 1) axes.push_back(a);
  }
  return axes;
}

// all_gather on one axis: `out` holds `total` elements, n chunks; chunk r is this rank's
// (copied from `own` first when given). Step s forwards the chunk received at step s-1.
//
// On an encoded wire this rank's chunk is first rounded in `out` to what the others will
// decode (with error feedback from `feedback`, aligned with `out`, when given), part by
// part as it travels, so that every rank ends with the same values; the chunks passed on
// are forwarded exactly, since decoded values encode back to the same bytes.
void append_all_gather(Schedule& s, const AxisGroup& group, const Axis& axis, const float* own, float* out,
                       int64_t total, bool bidir, float* feedback = nullptr) {
  const int n = axis.size;
  const size_t first = add_steps(s, axis, n - 1);
  const Range mine = chunk_range(total, n, axis.coord, Part::kWhole);
  if (own) s.steps[first].pre_copies.push_back({out + mine.begin, own, mine.count});
  const std::vector<Pass> passes = passes_for(axis, bidir, take_collective_tag(group, axis));
  if (s.wire != DType::kF32) {
    for (size_t i = 0; i < passes.size(); ++i) {
      if (i > 0 && passes[i].part == passes[0].part) continue;  // a line sends the whole chunk both ways
      const Range x = chunk_range(total, n, axis.coord, passes[i].part);
      s.steps[first].roundings.push_back({out + x.begin, x.count, feedback ? feedback + x.begin : nullptr});
    }
  }
  for (const Pass& p : passes) {
    const int to = axis.neighbour(p.dir), from = axis.neighbour(-p.dir);
    for (int step = 1; step < n; ++step) {
      Step& st = s.steps[first + step - 1];
      if (int c = walk(axis, p.dir, -(step - 1)); c >= 0 && to != MPI_PROC_NULL) {
        Range x = chunk_range(total, n, c, p.part);
        st.sends.push_back({to, out + x.begin, x.count, p.tag});
      }
      if (int c = walk(axis, p.dir, -step); c >= 0 && from != MPI_PROC_NULL) {
        Range x = chunk_range(total, n, c, p.part);
        st.recvs.push_back({from, out + x.begin, x.count, p.tag});
      }
    }
  }
}

// reduce_scatter on one axis: `in` holds `total` elements, n chunks; the sum (or max) of
// chunk r over the axis lands in `out_chunk`. A partial sum of chunk c travels towards
// c, each rank adding its own contribution as the partial arrives, part by part (a
// pipelined step, schedule.h); the line's two directions meet at c, where the first to
// be reduced adds this rank's share and the second adds to that. With `feedback` (aligned
// with `in`), each message this rank sends of chunk c carries error feedback in
// feedback[c]: a rank sends each element of `in` but its own chunk at most once.
void append_reduce_scatter(Schedule& s, const AxisGroup& group, const Axis& axis, const float* in,
                           float* out_chunk, int64_t total, bool bidir, float* feedback = nullptr) {
  const int n = axis.size;
  const size_t first = add_steps(s, axis, n - 1);
  for (size_t i = first; i < s.steps.size(); ++i) s.steps[i].segment = kReduceSegmentFloats;
  const Range mine = chunk_range(total, n, axis.coord, Part::kWhole);
  const int64_t largest = (total + n - 1) / n;
  bool mine_started = false;  // on a line, whether one direction's partial of chunk r has been added
  for (const Pass& p : passes_for(axis, bidir, take_collective_tag(group, axis))) {
    const int to = axis.neighbour(p.dir), from = axis.neighbour(-p.dir);
    // Partial sums passed on at the next step, ping-pong (none on a ring of two).
    float* partial[2] = {n > 2 ? s.scratch(largest) : nullptr, n > 2 ? s.scratch(largest) : nullptr};
    for (int step = 1; step < n; ++step) {
      Step& st = s.steps[first + step - 1];
      // Chunk r + dir*(n-step) leaves now; on a line only chunks beyond this rank exist.
      if (int c = walk(axis, p.dir, n - step); c >= 0 && to != MPI_PROC_NULL) {
        Range x = chunk_range(total, n, c, p.part);
        const bool forwarding = step > 1 && from != MPI_PROC_NULL;  // else this rank starts it
        st.sends.push_back({to, forwarding ? partial[(step - 1) % 2] : in + x.begin, x.count, p.tag,
                            feedback ? feedback + x.begin : nullptr});
      }
      if (int c = walk(axis, p.dir, n - step - 1); c >= 0 && from != MPI_PROC_NULL) {
        Range x = chunk_range(total, n, c, p.part);
        if (step < n - 1) {  // add this rank's share, pass it on
          st.recvs.push_back({from, nullptr, x.count, p.tag, partial[step % 2], in + x.begin});
        } else {  // c == r: done
          float* dst = out_chunk + (x.begin - mine.begin);
          st.recvs.push_back({from, nullptr, x.count, p.tag, dst, mine_started ? dst : in + x.begin});
          mine_started = p.part == Part::kWhole;
        }
      }
    }
  }
}

// all_to_all on one axis: `in` and `out` hold n chunks of `m`; chunk j of `in` goes to
// coordinate j, chunk i of `out` came from coordinate i. Store-and-forward: step s sends
// the bundle of chunks from the source s-1 hops back that must travel s or more hops,
// packed by distance so that each bundle is contiguous.
void append_all_to_all(Schedule& s, const AxisGroup& group, const Axis& axis, const float* in, float* out,
                       int64_t m, bool bidir) {
  const int n = axis.size, r = axis.coord;
  struct Way {
    int dir;
    int max_hops;
  };
  std::vector<Way> ways;
  if (!axis.wraparound) {
    ways = {{+1, n - 1}, {-1, n - 1}};
  } else if (bidir) {
    ways = {{+1, n / 2}, {-1, (n - 1) / 2}};  // each chunk the short way round
  } else {
    ways = {{+1, n - 1}};
  }
  // How many hops chunks from `src` travel in this direction at most.
  auto reach = [&](int src, const Way& w) {
    if (axis.wraparound) return w.max_hops;
    return w.dir > 0 ? n - 1 - src : src;
  };
  int steps = 0;
  for (const Way& w : ways) steps = std::max(steps, w.max_hops);
  const size_t first = add_steps(s, axis, steps);
  s.steps[first].pre_copies.push_back({out + r * m, in + r * m, m});
  if (s.wire != DType::kF32) s.steps[first].roundings.push_back({out + r * m, m});  // as if it had travelled
  const int tag = take_collective_tag(group, axis);
  for (size_t wi = 0; wi < ways.size(); ++wi) {
    const Way& w = ways[wi];
    if (w.max_hops == 0) continue;
    const int to = axis.neighbour(w.dir), from = axis.neighbour(-w.dir);
    float* own = s.scratch(w.max_hops * m);
    float* bundle[2] = {s.scratch(w.max_hops * m), s.scratch(w.max_hops * m)};
    for (int d = 1; d <= reach(r, w); ++d) {
      s.steps[first].pre_copies.push_back({own + (d - 1) * m, in + walk(axis, w.dir, d) * m, m});
    }
    for (int step = 1; step <= w.max_hops; ++step) {
      Step& st = s.steps[first + step - 1];
      if (int src = walk(axis, w.dir, -(step - 1)); src >= 0) {
        const int chunks = reach(src, w) - step + 1;
        const float* data = step == 1 ? own : bundle[(step - 1) % 2] + m;  // drop the chunk that was ours
        if (chunks > 0) st.sends.push_back({to, data, chunks * m, tag + static_cast<int>(wi)});
      }
      if (int src = walk(axis, w.dir, -step); src >= 0) {
        const int chunks = reach(src, w) - step + 1;
        if (chunks > 0) {
          float* got = bundle[step % 2];
          st.recvs.push_back({from, got, chunks * m, tag + static_cast<int>(wi)});
          st.post_copies.push_back({out + src * m, got, m});  // the first chunk is for us
        }
      }
    }
  }
}

// Copies src viewed as [outer][mid][inner] into dst as [mid][outer][inner].
void transpose_copies(std::vector<Combine>& copies, float* dst, const float* src, int64_t outer, int64_t mid,
                      int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < mid; ++i) copies.push_back({dst + (i * outer + o) * inner, src + (o * mid + i) * inner, inner});
  }
}

}  // namespace

int take_collective_tag(const AxisGroup& group, const Axis& axis) {
  int& seq = group.context().next_tag[axis.index];
  const int tag = kFirstScheduleTag + kTagsPerCollective * seq;
  seq = (seq + 1) % kTagCycle;
  return tag;
}

Schedule ring_all_gather(const AxisGroup& group, std::span<const float> in, std::span<float> out, bool bidir,
                         DType wire) {
  Schedule s(group.context().scratch);
  s.wire = wire;
  const std::vector<const Axis*> axes = active_axes(group);
  const float* src = in.data();
  int64_t gathered = static_cast<int64_t>(in.size());
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    gathered *= (*it)->size;
    float* dst = std::next(it) == axes.rend() ? out.data() : s.scratch(gathered);
    append_all_gather(s, group, **it, src, dst, gathered, bidir);
    src = dst;
  }
  return s;
}

int64_t feedback_floats(const AxisGroup& group, CollectiveOp op, int64_t elements) {
  int64_t floats = 0;
  for (const Axis* axis : active_axes(group)) {
    floats += elements;
    if (op == CollectiveOp::kReduceScatter) elements /= axis->size;
  }
  return floats;
}

Schedule ring_reduce_scatter(const AxisGroup& group, std::span<const float> in, std::span<float> out, bool bidir,
                             DType wire, std::span<float> feedback) {
  Schedule s(group.context().scratch);
  s.wire = wire;
  const std::vector<const Axis*> axes = active_axes(group);
  const float* src = in.data();
  float* stage_feedback = feedback.empty() ? nullptr : feedback.data();
  int64_t total = static_cast<int64_t>(in.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    float* dst = i + 1 == axes.size() ? out.data() : s.scratch(total / axes[i]->size);
    append_reduce_scatter(s, group, *axes[i], src, dst, total, bidir, stage_feedback);
    src = dst;
    if (stage_feedback) stage_feedback += total;
    total /= axes[i]->size;
  }
  return s;
}

// Axis by axis: a reduce_scatter, then an all_gather of this rank's reduced chunk. On an
// encoded wire the feedback of one axis's sends and of the rounding of its own chunk share
// one region of `total` floats (a rank never sends its own chunk in the reduce_scatter).
Schedule ring_all_reduce(const AxisGroup& group, std::span<float> buffer, ReduceOp op, bool bidir, DType wire,
                         std::span<float> feedback) {
  Schedule s(group.context().scratch);
  s.op = op;
  s.wire = wire;
  const int64_t total = static_cast<int64_t>(buffer.size());
  float* axis_feedback = feedback.empty() ? nullptr : feedback.data();
  for (const Axis* axis : active_axes(group)) {
    const Range chunk = chunk_range(total, axis->size, axis->coord, Part::kWhole);
    append_reduce_scatter(s, group, *axis, buffer.data(), buffer.data() + chunk.begin, total, bidir, axis_feedback);
    append_all_gather(s, group, *axis, nullptr, buffer.data(), total, bidir, axis_feedback);
    if (axis_feedback) axis_feedback += total;
  }
  return s;
}

Schedule ring_all_to_all(const AxisGroup& group, std::span<const float> in, std::span<float> out, bool bidir,
                         DType wire) {
  Schedule s(group.context().scratch);
  s.wire = wire;
  const std::vector<const Axis*>& axes = group.axes();
  const int64_t total = static_cast<int64_t>(in.size());
  const float* current = in.data();
  int64_t outer = 1;  // product of the sizes of the axes before the one being exchanged
  for (size_t i = 0; i < axes.size(); ++i) {
    const Axis& axis = *axes[i];
    const int64_t block = total / outer / axis.size;  // elements per (outer, coord) block
    const bool last = std::none_of(axes.begin() + i + 1, axes.end(), [](const Axis* a) { return a->size > 1; });
    if (axis.size > 1) {
      float* result = last ? out.data() : s.scratch(total);
      const float* send = current;
      float* recv = result;
      if (outer > 1) {  // bring this axis outermost, exchange, put it back
        float* staged = s.scratch(total);
        recv = s.scratch(total);
        send = staged;
        const size_t first = s.steps.size();
        append_all_to_all(s, group, axis, send, recv, total / axis.size, bidir);
        std::vector<Combine> stage;  // must run before the exchange's own pre-copies read `staged`
        transpose_copies(stage, staged, current, outer, axis.size, block);
        auto& pre = s.steps[first].pre_copies;
        pre.insert(pre.begin(), stage.begin(), stage.end());
        transpose_copies(s.steps.back().post_copies, result, recv, axis.size, outer, block);
      } else {
        append_all_to_all(s, group, axis, send, recv, total / axis.size, bidir);
      }
      current = result;
    }
    outer *= axis.size;
  }
  return s;
}

Schedule ring_ppermute(const AxisGroup& group, std::span<const float> in, std::span<float> out, int shift,
                       bool bidir, DType wire) {
  const Axis& axis = group.single_axis();
  const int n = axis.size, forward = ((shift % n) + n) % n;
  const int64_t m = static_cast<int64_t>(in.size());
  Schedule s(group.context().scratch);
  s.wire = wire;
  if (forward == 0) {
    add_steps(s, axis, 1);
    s.steps[0].pre_copies.push_back({out.data(), in.data(), m});
    if (wire != DType::kF32) s.steps[0].roundings.push_back({out.data(), m});  // as if it had travelled
    return s;
  }
  struct Way {
    int dir;
    int hops;
  };
  std::vector<Way> ways;
  if (!axis.wraparound) {
    ways = {{+1, forward}, {-1, n - forward}};  // sources near the end go back along the line
  } else if (bidir && n - forward < forward) {
    ways = {{-1, n - forward}};
  } else {
    ways = {{+1, forward}};
  }
  // Whether the buffer of `src` travels this way: on a line, only if its target is on the line.
  auto travels = [&](int src, const Way& w) {
    const int target = src + w.dir * w.hops;
    return src >= 0 && (axis.wraparound || (target >= 0 && target < n));
  };
  int steps = 0;
  for (const Way& w : ways) steps = std::max(steps, w.hops);
  const size_t first = add_steps(s, axis, steps);
  const int tag = take_collective_tag(group, axis);
  for (size_t wi = 0; wi < ways.size(); ++wi) {
    const Way& w = ways[wi];
    const int to = axis.neighbour(w.dir), from = axis.neighbour(-w.dir);
    float* hop[2] = {s.scratch(m), s.scratch(m)};
    for (int step = 1; step <= w.hops; ++step) {
      Step& st = s.steps[first + step - 1];
      if (travels(walk(axis, w.dir, -(step - 1)), w)) {
        st.sends.push_back({to, step == 1 ? in.data() : hop[(step - 1) % 2], m, tag + static_cast<int>(wi)});
      }
      if (travels(walk(axis, w.dir, -step), w)) {
        st.recvs.push_back({from, step == w.hops ? out.data() : hop[step % 2], m, tag + static_cast<int>(wi)});
      }
    }
  }
  return s;
}

}  // namespace shardlab::parallel
