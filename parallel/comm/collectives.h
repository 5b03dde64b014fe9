// Collectives on a mesh axis or a group of axes (docs/collectives.md; the book's chapter 3).
//
// Every collective takes an AxisGroup (mesh.axis("tensor"), mesh.group({"data","fsdp"}))
// and float buffers owned by the caller. "Rank i" below means rank i of the group,
// i.e. row-major over its axes' coordinates, outermost first. With G = group.size():
//
//   all_gather      in: m floats           out: G*m, block i from rank i
//   reduce_scatter  in: G*m floats         out: m, the sum over ranks of block `rank`
//   all_reduce      buffer: any size, in place, sum or max over ranks
//   all_to_all      in: G*m floats         out: G*m; block j of in goes to rank j,
//                                          block i of out came from rank i
//   ppermute        one axis; in goes to the rank `shift` coordinates further along
//                   (cyclically), out comes from `shift` coordinates back
//   send / recv     one axis; to or from a coordinate on it (pipeline neighbours)
//
// Sizes that do not divide the group are rejected with a UserError naming the sizes
// (pad the buffer to a multiple of G). Outputs must not overlap inputs. A group of size
// 1 returns at once (copying in to out) and records nothing.
//
// Algorithms (collective_types.h): native, ring, bidir, two_level, auto. All give
// bit-identical results on integer-valued data; on general floats they differ only in
// summation order. ring and bidir need neighbour links only, emulate ICI, and route as a
// line on axes without wraparound (ring_algorithms.h). two_level is all_reduce over the
// hosts a group spans (two_level.h): on a group that spans no hosts evenly, and for the
// other ops, it runs native; all_reduce_async with it finishes before it returns. auto
// picks two_level for an all_reduce of kTwoLevelMinBytes or more on a group that spans
// several hosts with the same ranks on each, and otherwise per op and size from the
// mesh's AlgorithmTable. send/recv and ppermute-native are point-to-point MPI.
//
// Async forms return a CollectiveHandle; the buffers must stay alive and untouched until
// it completes. OpenMPI progresses messages only inside MPI calls, so call test() now and
// then (between compute ops) to keep a neighbour algorithm moving; wait() finishes it.
//
//   all_reduce(mesh.axis("data"), grads);                          // blocking, auto
//   CollectiveHandle h = all_gather_async(mesh.axis("fsdp"), shard, full, Algorithm::kBidir);
//   while (!h.test()) do_some_compute();
//
// Every collective is recorded in the mesh's CommTrace (bytes as comm_trace.h counts
// them) and watched by its Watchdog while a rank waits for it.
#pragma once

#include <memory>
#include <span>

#include "framework/ops/bf16.h"
#include "framework/precision.h"
#include "parallel/comm/collective_types.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {

// An in-flight collective. Move-only; destroying an unfinished handle waits for it.
class CollectiveHandle {
 public:
  struct State;

  CollectiveHandle();  // an already finished handle
  explicit CollectiveHandle(std::unique_ptr<State> state);
  ~CollectiveHandle();
  CollectiveHandle(CollectiveHandle&&) noexcept;
  CollectiveHandle& operator=(CollectiveHandle&&) noexcept;

  bool test();  // makes progress without blocking; true once finished
  void wait();  // blocks until finished

 private:
  std::unique_ptr<State> state_;
};

// Wire formats (framework/ops/wire_format.h; --reduce-dtype, --gather-dtype): with `wire`
// kBF16 or kInt8 the messages travel encoded -- half the bytes, or block-scaled int8 at
// about a quarter -- and every sum is taken in fp32: each ring hop decodes the partial
// sum that arrives, adds its own share in fp32 and encodes what it forwards. all_reduce
// and all_gather round each rank's own chunk to its wire values before sending it, so
// every rank holds the same values. MPI cannot sum or round these, so they run as ring
// (auto, native) or bidir. A group of one rank sends nothing and rounds nothing.
//
// Error feedback: `feedback` (error_feedback_floats() floats, zeroed before the first
// call, then kept by the caller between calls on the same buffer) holds what each
// encoding lost; it is added to the next call's values before they are encoded, so
// rounding errors cancel over steps instead of accumulating (gradients under int8).
void all_gather(const AxisGroup& group, std::span<const float> in, std::span<float> out,
                Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32);
void reduce_scatter(const AxisGroup& group, std::span<const float> in, std::span<float> out,
                    Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32, std::span<float> feedback = {});
void all_reduce(const AxisGroup& group, std::span<float> buffer, ReduceOp op = ReduceOp::kSum,
                Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32, std::span<float> feedback = {});
// Residual floats the error feedback of a reduce_scatter (op kReduceScatter, `elements`
// the input's size) or all_reduce (kAllReduce) on `group` needs.
int64_t error_feedback_floats(const AxisGroup& group, CollectiveOp op, int64_t elements);
// The collectives that move values without summing them (all_to_all, ppermute, send and
// recv) take a wire too, fp32 or bf16 (int8 is refused): on bf16 each value arrives as
// its bf16 rounding, and a value that stays on its rank (all_to_all's own block, a
// ppermute by a multiple of the axis size) is rounded alike, so the result is the fp32
// collective's on bf16-rounded inputs wherever a value ends up (activations between
// model-parallel ranks under --precision bf16, docs/mixed_precision.md). all_to_all and
// ppermute on an encoded wire run as ring or bidir; send and recv stay point-to-point.
void all_to_all(const AxisGroup& group, std::span<const float> in, std::span<float> out,
                Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32);
void ppermute(const AxisGroup& axis, std::span<const float> in, std::span<float> out, int shift,
              Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32);

CollectiveHandle all_gather_async(const AxisGroup& group, std::span<const float> in, std::span<float> out,
                                  Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32);
CollectiveHandle reduce_scatter_async(const AxisGroup& group, std::span<const float> in, std::span<float> out,
                                      Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32,
                                      std::span<float> feedback = {});
CollectiveHandle all_reduce_async(const AxisGroup& group, std::span<float> buffer, ReduceOp op = ReduceOp::kSum,
                                  Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32,
                                  std::span<float> feedback = {});
CollectiveHandle all_to_all_async(const AxisGroup& group, std::span<const float> in, std::span<float> out,
                                  Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32);
CollectiveHandle ppermute_async(const AxisGroup& axis, std::span<const float> in, std::span<float> out, int shift,
                                Algorithm algorithm = Algorithm::kAuto, DType wire = DType::kF32);

// all_gather of bf16 values (parameters gathered in a bf16 precision policy): half the
// bytes of fp32 on every link. The values travel bit for bit, two to a float, so `in`
// must hold an even count (pad it); the trace counts the bytes that travel.
void all_gather(const AxisGroup& group, std::span<const Bf16> in, std::span<Bf16> out,
                Algorithm algorithm = Algorithm::kAuto);
CollectiveHandle all_gather_async(const AxisGroup& group, std::span<const Bf16> in, std::span<Bf16> out,
                                  Algorithm algorithm = Algorithm::kAuto);

// Point-to-point on one axis; `tag` tells apart several messages in flight between the
// same pair (0 <= tag < kFirstScheduleTag). `wire` as for all_to_all: both ends must
// agree; send encodes at once (the buffer is free to change after the call), recv's
// buffer holds the decoded values once the handle completes.
void send(const AxisGroup& axis, std::span<const float> buffer, int to_coord, int tag = 0, DType wire = DType::kF32);
void recv(const AxisGroup& axis, std::span<float> buffer, int from_coord, int tag = 0, DType wire = DType::kF32);
CollectiveHandle send_async(const AxisGroup& axis, std::span<const float> buffer, int to_coord, int tag = 0,
                            DType wire = DType::kF32);
CollectiveHandle recv_async(const AxisGroup& axis, std::span<float> buffer, int from_coord, int tag = 0,
                            DType wire = DType::kF32);

// The algorithm `auto` resolves to for this collective on this group.
Algorithm resolve_algorithm(const AxisGroup& group, CollectiveOp op, int64_t bytes, Algorithm requested);
// What all_reduce_async runs: resolve_algorithm's choice, except that from
// kAsyncRingMinBytes it runs the ring where auto would give the buffer to MPI's nonblocking
// all_reduce, which is slow over TCP and on shared memory alike (collectives.cpp).
inline constexpr int64_t kAsyncRingMinBytes = 1 << 20;
Algorithm async_all_reduce_algorithm(const AxisGroup& group, int64_t bytes, Algorithm requested);

}  // namespace shardlab::parallel
