#include "framework/data/token_files.h"

#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "framework/error.h"

namespace shardlab::data {
namespace {

std::ifstream open_for_reading(const std::string& path, const char* what) {
  if (std::filesystem::is_directory(path)) {
    throw UserError("--data '" + path + "' is a directory; give a text file or an llm.c .bin token shard");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError(std::string("cannot open ") + what + " '" + path + "': " + std::strerror(errno) +
                    "; check the path (relative paths start from the working directory)");
  }
  return in;
}

int64_t file_size(std::ifstream& in) {
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  in.seekg(0, std::ios::beg);
  return size;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<uint16_t> read_text_bytes(const std::string& path) {
  std::ifstream in = open_for_reading(path, "text file");
  std::vector<char> bytes(file_size(in));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    throw UserError("could not read text file '" + path + "'; check that it is a readable regular file");
  }
  return std::vector<uint16_t>(reinterpret_cast<const unsigned char*>(bytes.data()),
                               reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size());
}

ShardHeader parse_shard_header(const std::string& path, std::span<const unsigned char> bytes, int64_t file_size) {
  const std::string fix = "; it is not an llm.c token shard (write one with data::write_shard, prepare_data or "
                          "llm.c's dev/data scripts), or pass a text file whose name does not end in .bin";
  if (file_size < kShardHeaderBytes || static_cast<int64_t>(bytes.size()) < kShardHeaderBytes) {
    throw UserError("token shard '" + path + "' has " + std::to_string(file_size) + " bytes, less than its " +
                    std::to_string(kShardHeaderBytes) + "-byte header" + fix);
  }
  std::array<int32_t, 3> header{};
  std::memcpy(header.data(), bytes.data(), sizeof header);
  ShardHeader h;
  if (header[0] == kShardMagic) {
    h.token_bytes = 2;
  } else if (header[0] == kShardMagicU32) {
    h.token_bytes = 4;
  } else {
    throw UserError("token shard '" + path + "' has magic " + std::to_string(header[0]) + ", expected " +
                    std::to_string(kShardMagic) + " (GPT-2's uint16 tokens) or " + std::to_string(kShardMagicU32) +
                    " (LLaMA 3's uint32)" + fix);
  }
  const int32_t version = h.token_bytes == 2 ? kShardVersion : kShardVersionU32;
  if (header[1] != version) {
    throw UserError("token shard '" + path + "' has magic " + std::to_string(header[0]) + " and version " +
                    std::to_string(header[1]) + ", but with that magic only version " + std::to_string(version) +
                    " (uint" + std::to_string(8 * h.token_bytes) + " tokens) is supported; re-export it with "
                    "llm.c's writer (dev/data/data_common.py) or prepare_data");
  }
  h.tokens = header[2];
  const int64_t expected = kShardHeaderBytes + h.tokens * h.token_bytes;
  if (h.tokens < 0 || file_size != expected) {
    throw UserError("token shard '" + path + "' header says " + std::to_string(h.tokens) + " tokens (" +
                    std::to_string(expected) + " bytes) but the file has " + std::to_string(file_size) +
                    " bytes; the file is truncated or corrupt: copy or export it again");
  }
  return h;
}

std::vector<uint16_t> read_shard(const std::string& path) {
  std::ifstream in = open_for_reading(path, "token shard");
  const int64_t size = file_size(in);
  std::array<unsigned char, kShardHeaderBytes> header{};
  in.read(reinterpret_cast<char*>(header.data()), std::min<int64_t>(size, kShardHeaderBytes));
  const ShardHeader h = parse_shard_header(path, {header.data(), static_cast<size_t>(std::min<int64_t>(size, kShardHeaderBytes))}, size);
  if (h.token_bytes != 2) {
    throw UserError("token shard '" + path + "' holds uint32 tokens (LLaMA 3's form), which this reader keeps as "
                    "uint16; read it with data::ShardSet (train_gpt --data does)");
  }
  std::vector<uint16_t> tokens(h.tokens);
  if (!in.read(reinterpret_cast<char*>(tokens.data()), h.tokens * static_cast<std::streamsize>(sizeof(uint16_t)))) {
    throw UserError("could not read the tokens of shard '" + path + "'; check that it is a readable regular file");
  }
  return tokens;
}

namespace {

template <typename Token>
void write_shard_of(const std::string& path, std::span<const Token> tokens, int32_t magic, int32_t version) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    throw UserError("cannot write " + std::to_string(tokens.size()) + " tokens into shard '" + path +
                    "': the header's int32 count holds at most 2^31-1; split them over several shards");
  }
  std::array<int32_t, kShardHeaderInts> header{};
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(header.data()), sizeof header);
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(Token)));
  out.close();
  if (!out) {
    throw UserError("could not write token shard '" + path + "': " + std::strerror(errno) +
                    "; check that the directory exists and is writable");
  }
}

}  // namespace

void write_shard(const std::string& path, std::span<const uint16_t> tokens) {
  write_shard_of(path, tokens, kShardMagic, kShardVersion);
}

void write_shard(const std::string& path, std::span<const uint32_t> tokens) {
  write_shard_of(path, tokens, kShardMagicU32, kShardVersionU32);
}

bool is_token_shard(const std::string& path) { return ends_with(path, ".bin"); }

std::vector<uint16_t> read_token_file(const std::string& path) {
  return is_token_shard(path) ? read_shard(path) : read_text_bytes(path);
}

std::vector<std::string> expand_data_paths(const std::string& pattern, const std::string& what) {
  const std::filesystem::path path(pattern);
  const std::string name = path.filename().string();
  if (name.find_first_of("*?[") == std::string::npos) return {pattern};
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file() && fnmatch(name.c_str(), entry.path().filename().c_str(), 0) == 0) {
      found.push_back(entry.path().string());
    }
  }
  if (found.empty()) {
    throw UserError(what + " '" + pattern + "' matches no file in '" + dir.string() +
                    "'; check the directory and the pattern (quote it so the shell does not expand it)");
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<uint16_t> read_token_files(const std::string& pattern) {
  std::vector<uint16_t> tokens;
  for (const std::string& path : expand_data_paths(pattern)) {
    const std::vector<uint16_t> more = read_token_file(path);
    tokens.insert(tokens.end(), more.begin(), more.end());
  }
  return tokens;
}

}  // namespace shardlab::data
