// The layout (parallel/layout.h): parsed from a mesh spec or built from degrees, and
// validated against a model before any collective -- each error names the values and the
// fix. No MPI: every rank runs the same check before the first collective. The checks of
// pipeline, expert and context layouts sit beside their strategies' tests.
#include <doctest/doctest.h>

#include <string>

#include "framework/nn/config.h"
#include "parallel/layout.h"
#include "tests/user_error.h"

using namespace shardlab;
using namespace shardlab::parallel;
using shardlab::testing::user_error_of;

TEST_CASE("a layout the model cannot be split over is a clear error, before any collective") {
  nn::ModelConfig c = nn::ModelConfig::preset("llama-tiny");  // N = 4, K = 2, F = 24, V = 256
  const auto error = [&](const std::string& spec) {
    return user_error_of([&] { Layout::from_spec(spec).validate({.model = c}); });
  };
  CHECK(error("tensor=3").find("tensor axis 3 does not divide the attention heads 4") != std::string::npos);
  c.n_heads = 6;
  c.n_kv_heads = 3;
  c.d_model = 36;
  CHECK(error("tensor=2").find("tensor axis 2 and the 3 kv heads must divide one another") != std::string::npos);
  c = nn::ModelConfig::preset("llama-tiny");
  c.d_ff = 30;
  CHECK(error("tensor=4").find("does not divide the MLP hidden size d_ff 30") != std::string::npos);
  c = nn::ModelConfig::preset("llama-tiny");
  c.vocab = 258;
  CHECK(error("tensor=4").find("does not divide the vocabulary 258") != std::string::npos);
  CHECK(error("expert=2").find("mesh axis expert=2 needs a mixture-of-experts model") != std::string::npos);
  Layout overlap = Layout::from_spec("tensor=2");
  overlap.tp_overlap = true;
  CHECK(user_error_of([&] { overlap.validate({.model = nn::ModelConfig::preset("llama-tiny")}); })
            .find("turn sequence parallelism on") != std::string::npos);
  Layout sp_layout = Layout::from_spec("data=2,tensor=4");
  sp_layout.microbatches = 2;
  sp_layout.sequence_parallel = true;
  const std::string sp = user_error_of([&] {
    sp_layout.validate({.model = nn::ModelConfig::preset("llama-tiny"), .global_batch = 8});
  });
  CHECK(sp.find("splits each microbatch's 2 sequences over the tensor axis 4") != std::string::npos);
  CHECK_NOTHROW(Layout::from_spec("tensor=4").validate({.model = nn::ModelConfig::preset("llama-tiny")}));
}

TEST_CASE("a layout reads as its mesh, whether parsed or built from degrees as the cost model builds it") {
  const Layout parsed = Layout::from_spec("tensor=4");
  CHECK(parsed.describe() == "data=1,tensor=4");  // a data axis of 1 in front
  CHECK(parsed.num_ranks() == 4);
  CHECK(parsed.data_ranks() == 1);
  const Layout ordered = Layout::from_spec("data=2,expert=2,tensor=2");
  CHECK(ordered.data == 2);
  CHECK(ordered.expert == 2);
  CHECK(ordered.data_ranks() == 4);
  Layout named;
  for (const std::string& axis : kAxisNames) *named.degree(axis) = 2;  // every axis by its name
  CHECK(named.num_ranks() == 64);
  CHECK(named.degree("microbatches") == nullptr);
  CHECK(*ordered.degree(kExpertAxis) == 2);
  // Built from degrees alone, the mesh reads in kAxisNames' order.
  CHECK(Layout{.data = 2, .context = 2, .tensor = 4}.describe() == "data=2,context=2,tensor=4");
  CHECK(Layout{.fsdp = 4}.describe() == "fsdp=4");
  CHECK(Layout{}.describe() == "data=1");
}
