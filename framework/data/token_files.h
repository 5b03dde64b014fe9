// Token files on disk: byte-level text and llm.c token shards.
//
// Text: any file; every byte is one token (vocabulary 256).
// llm.c shard (as written by llm.c's dev/data scripts): a header of 256 little-endian
// int32 -- [0] magic 20240520, [1] version 1, [2] token count N, the rest zero -- then
// N uint16 tokens. See docs/data.md.
//
// Every reader throws UserError naming the path, what it found and the fix when the
// file is missing, unreadable, too short or has a bad header.
//
//   data::write_shard("tiny.bin", {1, 2, 3});
//   std::vector<uint16_t> tokens = data::read_token_file("tiny.bin");   // shard, by extension
//   tokens = data::read_token_files("shards/train_*.bin");               // every matching shard
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardlab::data {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int kShardHeaderInts = 256;

std::vector<uint16_t> read_text_bytes(const std::string& path);
std::vector<uint16_t> read_shard(const std::string& path);
void write_shard(const std::string& path, std::span<const uint16_t> tokens);

// Whether a path (or a --data pattern) names llm.c token shards rather than byte-level
// text: it ends in ".bin". What a checkpoint's `data` says its model's tokens are.
bool is_token_shard(const std::string& path);
// read_shard for token shards (is_token_shard), read_text_bytes for anything else.
std::vector<uint16_t> read_token_file(const std::string& path);

// The files a --data argument names: the path itself, or -- when its file name holds a
// wildcard (* ? [) -- every file of that directory matching it, sorted by name
// ("fineweb/train_*.bin"); UserError, naming the pattern as `what`, when none matches.
std::vector<std::string> expand_data_paths(const std::string& pattern, const std::string& what = "--data");
// The tokens of every file expand_data_paths finds, one after another.
std::vector<uint16_t> read_token_files(const std::string& pattern);

}  // namespace shardlab::data
