// The neighbour-only algorithms behind Algorithm::kRing and kBidir, as Schedules.
//
// On one axis of n ranks (this rank at coordinate r):
//   ring, torus   one direction round the ring, n-1 steps of one chunk each (all_gather,
//                 reduce_scatter), the book's unidirectional ICI.
//   bidir, torus  every chunk split in halves, one half each way round: n-1 steps of
//                 half a chunk, twice the bandwidth of ring.
//   no wraparound ring and bidir alike route as a line, as a TPU slice without
//                 wraparound links does: data flows both ways along the line, whole
//                 chunks, n-1 steps, so it takes as long as the unidirectional ring.
// all_reduce is reduce_scatter then all_gather (any size: chunks differ by at most one
// element). all_to_all is store-and-forward: each step passes on the chunks still
// travelling (bidir sends each chunk the short way round). ppermute forwards the buffer
// hop by hop along the shift (bidir: the short way; a line: the line's way).
//
// Several axes run as per-axis steps: all_gather innermost axis first, reduce_scatter
// outermost first, all_reduce axis by axis, all_to_all axis by axis with the buffer
// transposed so that the axis being exchanged is outermost. Size-1 axes add no steps.
//
// Message tags: every collective takes fresh tags on each axis it uses, from
// CommContext::next_tag, at or above kFirstScheduleTag; point-to-point send/recv use
// tags below it, so concurrent async collectives never take each other's messages.
#pragma once

#include <span>

#include "parallel/comm/collective_types.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/schedule.h"

namespace shardlab::parallel {

inline constexpr int kFirstScheduleTag = 1024;

// Fresh tags for one collective on `axis` (two: one per direction). Every rank of the
// axis must call it for the same collectives in the same order.
int take_collective_tag(const AxisGroup& group, const Axis& axis);

// Preconditions (checked by collectives.cpp): out.size() == in.size() * group.size() for
// all_gather, in.size() == out.size() * group.size() for reduce_scatter, in and out the
// same size and a multiple of group.size() for all_to_all; out does not overlap in.
//
// `wire`: what the messages carry (Schedule::wire); sums are taken in fp32. On an encoded
// wire all_gather and all_reduce round each rank's own chunk to its wire values before
// sending it, so that every rank ends with the same values. `feedback`, when not empty,
// holds feedback_floats(...) floats of error-feedback residuals (zero at first, then left
// as the last call left them) for the messages this rank encodes.
Schedule ring_all_gather(const AxisGroup& group, std::span<const float> in, std::span<float> out, bool bidir,
                         DType wire = DType::kF32);
Schedule ring_reduce_scatter(const AxisGroup& group, std::span<const float> in, std::span<float> out, bool bidir,
                             DType wire = DType::kF32, std::span<float> feedback = {});
Schedule ring_all_reduce(const AxisGroup& group, std::span<float> buffer, ReduceOp op, bool bidir,
                         DType wire = DType::kF32, std::span<float> feedback = {});
// Residual floats a reduce_scatter or all_reduce of `elements` (the input's size) needs
// for error feedback on `group`: one region per axis of size > 1.
int64_t feedback_floats(const AxisGroup& group, CollectiveOp op, int64_t elements);
// On a bf16 wire the values that stay on this rank are rounded as the travelling ones are.
Schedule ring_all_to_all(const AxisGroup& group, std::span<const float> in, std::span<float> out, bool bidir,
                         DType wire = DType::kF32);
Schedule ring_ppermute(const AxisGroup& axis, std::span<const float> in, std::span<float> out, int shift, bool bidir,
                       DType wire = DType::kF32);

}  // namespace shardlab::parallel
