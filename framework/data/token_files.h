// Token files on disk: byte-level text and llm.c token shards.
//
// Text: any file; every byte is one token (vocabulary 256).
// llm.c shard (as written by llm.c's dev/data scripts): a header of 256 little-endian
// int32 -- [0] magic, [1] version, [2] token count N, the rest zero -- then N tokens:
// GPT-2's form (magic 20240520, version 1) holds uint16 tokens, LLaMA 3's (magic
// 20240801, version 7) uint32, for vocabularies past 65536. See docs/data.md.
//
// Every reader throws UserError naming the path, what it found and the fix when the
// file is missing, unreadable, too short or has a bad header.
//
//   data::write_shard("tiny.bin", std::vector<uint16_t>{1, 2, 3});       // GPT-2's form
//   data::write_shard("llama.bin", std::vector<uint32_t>{128000, 9906});  // LLaMA 3's form
//   std::vector<uint16_t> tokens = data::read_token_file("tiny.bin");   // shard, by extension
//   tokens = data::read_token_files("shards/train_*.bin");               // every matching shard
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardlab::data {

constexpr int32_t kShardMagic = 20240520;  // GPT-2's form: uint16 tokens
constexpr int32_t kShardVersion = 1;
constexpr int32_t kShardMagicU32 = 20240801;  // LLaMA 3's form: uint32 tokens
constexpr int32_t kShardVersionU32 = 7;
constexpr int kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// What a shard's header says, checked against the file: tokens of `token_bytes` (2 or 4)
// each, `tokens` of them, starting at byte kShardHeaderBytes.
struct ShardHeader {
  int token_bytes = 2;
  int64_t tokens = 0;
};
// Checks the first bytes of a file of `file_size` bytes at `path` (`bytes` holds
// min(file_size, kShardHeaderBytes) of them): a UserError naming the path, what it found
// and the fix for a short file, an unknown magic or version, or a size other than the
// header's count of tokens.
ShardHeader parse_shard_header(const std::string& path, std::span<const unsigned char> bytes, int64_t file_size);

std::vector<uint16_t> read_text_bytes(const std::string& path);
// The tokens of a GPT-2-form (uint16) shard; a LLaMA 3-form one is refused (data::ShardSet reads both).
std::vector<uint16_t> read_shard(const std::string& path);
void write_shard(const std::string& path, std::span<const uint16_t> tokens);
void write_shard(const std::string& path, std::span<const uint32_t> tokens);  // LLaMA 3's form

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
