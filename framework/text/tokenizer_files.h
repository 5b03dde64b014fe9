// Tokenizer files -> text::Vocabulary (tokenizer.h): a Hugging Face tokenizer.json (GPT-2
// style) and a tiktoken file (LLaMA 3 style). docs/data.md, "Tokenizers", lists what each
// may hold.
//
//   text::Tokenizer gpt2(text::read_tokenizer_file("gpt2/tokenizer.json"));
//   text::Tokenizer llama(text::read_tokenizer_file("llama3/tokenizer.model"));
//
// Every reader throws UserError naming the file, the field or line, and the fix when a
// file is not a tokenizer of these kinds (a missing field, a merge of unknown tokens, a
// normalizer or pre-tokenizer shardlab does not implement).
#pragma once

#include <string>
#include <vector>

#include "framework/text/tokenizer.h"

namespace shardlab::text {

// The special tokens a LLaMA 3.1-3.2 tiktoken file leaves to its reader (Meta's
// tokenizer.py): 256 of them, <|begin_of_text|> first.
std::vector<std::string> llama3_special_tokens();

// read_hf_tokenizer_json for a file that starts with '{', read_tiktoken (LLaMA 3's pattern
// and specials) otherwise.
Vocabulary read_tokenizer_file(const std::string& path);

// model "BPE" (vocab, merges as "a b" strings or ["a", "b"] pairs, ignore_merges), tokens
// in the ByteLevel alphabet (GPT-2's bytes_to_unicode); pre_tokenizer ByteLevel (GPT-2's
// pattern) or a Sequence of a Split regex and ByteLevel without its own regex; no
// normalizer; added_tokens become the special tokens.
Vocabulary read_hf_tokenizer_json(const std::string& path);

// Lines of "<base64 bytes> <rank>": the rank is the token's id and its merge order (a pair
// merges into the token of their joined bytes, at that token's rank). `specials` are
// numbered from the largest rank + 1, in order. A piece that is a token is taken whole.
Vocabulary read_tiktoken(const std::string& path, const std::string& pattern = kLlama3Pattern,
                         const std::vector<std::string>& specials = llama3_special_tokens());

}  // namespace shardlab::text
