// The cost model: the arithmetic of the book "How to Scale Your Model" (jax-ml/scaling-book)
// as a library, namespace shardlab::cost, pure computation without MPI. One folder per part
// of the book; this header maps each chapter to its files and includes them all, for a
// reader (and a program such as shardlab-plan) that wants the whole model at once.
//
//   1  rooflines            roofline/roofline.h       FLOPs against bytes, dtypes, the matmul
//                                                     and its critical batch, a 2-chip matmul
//                           roofline/ops.h            elementwise ops, einsums, attention
//   2  TPUs                 hardware/hardware.h       the chips' tables (TPUs and GPUs), `local`
//                           hardware/calibrate.h      this machine measured as a profile
//                           hardware/host_offload.h   an array in host DRAM brought to a chip
//   3  sharded matmuls      sharding/sharded_array.h  A[I_X, J_Y] on a named mesh
//                           sharding/matmul_cases.h   the four cases and the collective each needs
//                           network/collective.h      all_gather ... all_to_all on tori
//                           network/wire_format.h     bytes on the wire: fp32, bf16, block-scaled int8
//   4  Transformer math     model/transformer.h       shapes, parameters, FLOPs, KV cache, memory
//                           model/layer_matmuls.h     each matmul of a layer on its own
//                           model/autograd_activations.h  what shardlab's own autograd keeps
//   5  training             training/axis_conditions.h  the book's conditions, one axis at a time
//                           training/train_step.h     a layout and one training step of it
//                           training/cpu_step.h       that step on CPU ranks, as train_gpt predicts it
//                           training/zero_memory.h    one rank's state under ZeRO stages 0-3
//                           training/tpu_conditions.h the conditions of a whole layout on tori
//                           network/multipod.h        pods joined by DCN
//   6  applied training     training/planner.h        every layout of a chip count, ranked
//                           training/run_totals.h     a whole run: 6PT, days, state, chips
//   7  inference            inference/prefill_decode.h  a prefill and a decode step
//                           inference/decode_sharding.h expert and KV-cache sharding at decode
//   8  serving              inference/serving.h       a slice's memory, runs, sharded generation,
//                                                     eviction, prefix caches, disaggregation,
//                                                     the best slice under a latency limit
//   12 GPUs                 network/fat_tree.h        NVLink nodes under an InfiniBand fat tree
//                           training/gpu_conditions.h the conditions of a layout on GPUs
//
// docs/cost_model.md gives each file's formulas; `shardlab-plan` answers them from the
// command line.
#pragma once

#include "parallel/cost/hardware/calibrate.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/hardware/host_offload.h"
#include "parallel/cost/inference/decode_sharding.h"
#include "parallel/cost/inference/prefill_decode.h"
#include "parallel/cost/inference/serving.h"
#include "parallel/cost/model/autograd_activations.h"
#include "parallel/cost/model/layer_matmuls.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/network/fat_tree.h"
#include "parallel/cost/network/multipod.h"
#include "parallel/cost/network/wire_format.h"
#include "parallel/cost/roofline/ops.h"
#include "parallel/cost/roofline/roofline.h"
#include "parallel/cost/sharding/matmul_cases.h"
#include "parallel/cost/sharding/sharded_array.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/gpu_conditions.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/run_totals.h"
#include "parallel/cost/training/tpu_conditions.h"
#include "parallel/cost/training/cpu_step.h"
#include "parallel/cost/training/train_step.h"
#include "parallel/cost/training/zero_memory.h"
