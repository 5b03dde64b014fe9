#include "parallel/runtime/evaluate.h"

#include "parallel/runtime/sampling.h"
#include "framework/autograd.h"

namespace shardlab::runtime {

EvalResult evaluate(const nn::Transformer& model, const DataSource& data, const RunConfig& run) {
  NoGradGuard no_grad;
  EvalResult r;
  // Always the first eval_batches held-out batches, so evaluations are comparable.
  data::BatchLoader loader(data.heldout, run.batch, run.sequence_length());
  for (int64_t i = 0; i < run.eval_batches; ++i) {
    data::Batch b = loader.next();
    r.loss += model.loss(b.inputs, b.targets, b.rows, b.seq_len).item() / static_cast<double>(run.eval_batches);
  }
  if (data.task && run.eval_problems > 0) {
    auto greedy = [&model](const std::vector<int>& prompt, int max_new) {
      return sample(model, {prompt}, {.max_new = max_new, .temperature = 0.0f, .stop_tokens = {'\n'}})[0];
    };
    r.accuracy = data.task->evaluate(greedy, run.eval_problems).accuracy();
  }
  return r;
}

}  // namespace shardlab::runtime
