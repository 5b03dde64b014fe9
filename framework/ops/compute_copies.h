// Weight compute copies: the bf16 form of a model's weights, made once and multiplied from
// for as long as the weights hold still (inference, where nothing updates them).
//
// Under a bf16 PrecisionScope every matmul converts its operands (MatmulOperand, matmul.h).
// For activations that is the only way; for a weight it means reading its fp32 values on
// every call -- during decoding, 4 bytes per parameter per token instead of bf16's 2. A
// ComputeCopies converts the weights it is given once, as MatmulOperand would (a Bf16Array
// on the native path, a bf16-rounded fp32 tensor on the rounded one, so every product is
// bitwise what the uncached op computes), and while it lives MatmulOperand(w, precision)
// takes the copy instead of converting w.
//
// Contract:
// - A copy is served only on the thread that made the ComputeCopies (like PrecisionScope),
//   only for its precision (bf16 and the same Bf16Matmul path; fp32 never uses a copy), and
//   only for the tensor it was made from -- the same TensorImpl with the same data pointer
//   and element count. A tensor whose storage has been replaced since (share_storage, a
//   reshape or detach that made a new TensorImpl) is converted as usual, never served a
//   stale copy.
// - The weights' values must not change while it lives: the copy is not remade, so an
//   in-place update (an optimizer step, copy_) would be multiplied with the old values. Open
//   it for inference after the weights are loaded, not around training steps.
// - It keeps the weights' storage alive (so a freed buffer cannot be recycled at the same
//   address and pass for the original) and holds the copies' bytes, counted under
//   MemoryCategory::Parameters, until it ends. Scopes nest; the innermost copy of a tensor
//   wins, and they must end in reverse order of creation (RAII locals do).
//
// - With `decode_panels`, each matrix also gets a MatvecPanels (framework/ops/matvec.h) in
//   the precision's dtype (fp32 or bf16), and ops::linear multiplies up to
//   kMatvecPanelsMaxRows rows from it (a decode step's, a short prompt's prefill). Its sums run in another order than matvec's or oneDNN's: a decode step's
//   outputs equal the uncached op's within fp32 rounding, not bitwise.
//
//   runtime::load_weights(path, model, ...);
//   const ComputeCopies copies(weights, policy.compute_precision(), {.decode_panels = true});
//   const PrecisionScope bf16(policy.compute_precision());
//   ... model.decode(...) ...   // every linear reads its weight's bf16 copy or panels
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "framework/ops/matmul.h"
#include "framework/ops/matvec.h"

namespace shardlab {

class ComputeCopies {
 public:
  struct Options {
    bool decode_panels = false;  // also lay every matrix out for the decode step's matvecs
  };
  // Copies every tensor in `weights` (each with storage) for `precision`; under fp32 it
  // makes no matmul copy, since fp32 matmuls read the weights themselves.
  ComputeCopies(const std::vector<Tensor>& weights, const ComputePrecision& precision, Options options);
  ComputeCopies(const std::vector<Tensor>& weights, const ComputePrecision& precision)
      : ComputeCopies(weights, precision, Options{}) {}
  ~ComputeCopies();
  ComputeCopies(const ComputeCopies&) = delete;
  ComputeCopies& operator=(const ComputeCopies&) = delete;

  int64_t tensors() const { return static_cast<int64_t>(copies_.size()); }
  int64_t bytes() const { return bytes_; }      // of the copies
  int64_t served() const { return served_; }    // matmul operands taken from a copy so far

  // The live copy of `x` for `precision` on this thread, innermost scope first, or nullptr.
  // MatmulOperand's constructor asks.
  static const MatmulOperand* find(const Tensor& x, const ComputePrecision& precision);
  // The live decode panels of weight `w` for `precision` on this thread, or nullptr.
  static const MatvecPanels* find_panels(const Tensor& w, const ComputePrecision& precision);

 private:
  struct Copy {
    const float* data;                 // x.data() when the copy was made
    int64_t numel;
    std::shared_ptr<Storage> storage;  // keeps that buffer from being recycled
    MatmulOperand operand;                 // bf16 only
    std::shared_ptr<const MatvecPanels> panels;  // with Options::decode_panels
  };
  enum class Form { kOperand, kPanels };
  // The copy of `x` in the innermost live scope of `precision` that holds it in `form`, or
  // nullptr; counted as served.
  static const Copy* lookup(const Tensor& x, const ComputePrecision& precision, Form form);
  ComputePrecision precision_;
  std::unordered_map<const TensorImpl*, Copy> copies_;
  int64_t bytes_ = 0;
  mutable int64_t served_ = 0;
};

}  // namespace shardlab
