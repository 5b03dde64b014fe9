#!/usr/bin/python3
"""An independent byte-level BPE, the reference test_tokenizer checks shardlab's against.

Usage: bpe_reference.py OUT_DIR

Trains a small byte-level BPE vocabulary on a built-in corpus (GPT-2's pre-tokenizer,
the most frequent pair merged first; the corpus ends in bytes that are not UTF-8), then writes to OUT_DIR:
  gpt2_strings.json  a Hugging Face tokenizer.json, ByteLevel pre-tokenizer, "a b" merges
  gpt2_pairs.json    the same with ["a", "b"] merges
  llama3.json        LLaMA 3's Split regex + ByteLevel, ignore_merges
  llama3.tiktoken    the same vocabulary as "<base64> <rank>" lines
  cases.json         [{"hex": text, "gpt2": ids, "llama3": ids}] for tricky texts
Token ids: byte b is id b, merge k makes id 256 + k, <|endoftext|> comes last.

The encoders follow the originals, not shardlab: GPT-2's encoder.py (merge every
occurrence of the lowest-ranked bigram per pass) and tiktoken's _byte_pair_merge (a piece
that is a token is taken whole, else merge the lowest-ranked adjacent pair, leftmost
first). Pre-tokenization runs the `regex` module (Debian python3-regex) on each run of
valid UTF-8; each run of invalid bytes is one piece.
"""
import base64
import json
import os
import sys

import regex

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
          r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
SPECIAL = "<|endoftext|>"

TRAINING = """The quick brown fox jumps over the lazy dog. It's the dog's day; they're sure we've
seen it, I'm told, and you'll see what he'd do. Numbers: 12345 678 90 3.14159 2024-11-26.
    Indented   text   with    runs of spaces, tabs\tand\nnewlines\n\n\nhere.
Ünïcödé naïve café résumé; Ελληνικά κείμενα; Привет, мир! 日本語のテキストです。
emoji 👋🌍🎉 and symbols !!! ??? ... --- === +++ ((())) [[ ]] {{ }} <<>> @@ ## $$ %% ^^ && **
the the the and and and of of to to in in is is that that it it for for
""" * 3


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHAR = bytes_to_unicode()


def pieces(data: bytes, pattern: str):
    """The pre-tokenizer: regex matches (and any gaps) in valid UTF-8, invalid runs whole."""
    text = data.decode("utf-8", errors="surrogateescape")  # invalid bytes -> U+DC80..U+DCFF
    for run in regex.findall(r"[\udc80-\udcff]+|[^\udc80-\udcff]+", text):
        if "\udc80" <= run[0] <= "\udcff":
            yield run.encode("utf-8", errors="surrogateescape")
            continue
        at = 0
        for m in regex.finditer(pattern, run):
            if m.start() > at:
                yield run[at:m.start()].encode("utf-8")
            if m.end() > m.start():
                yield m.group().encode("utf-8")
                at = m.end()
        if at < len(run):
            yield run[at:].encode("utf-8")


def merge_pair(word, pair):
    """`word` with every occurrence of `pair`, left to right, joined into one symbol."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def train(corpus: bytes, merges: int):
    words = {}
    for p in pieces(corpus, GPT2):
        words[tuple(bytes([b]) for b in p)] = words.get(tuple(bytes([b]) for b in p), 0) + 1
    ranks = []
    for _ in range(merges):
        counts = {}
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] = counts.get(pair, 0) + n
        if not counts:
            break
        best = max(counts, key=lambda pair: (counts[pair], pair))
        ranks.append(best)
        merged = {}
        for word, n in words.items():
            out = tuple(merge_pair(word, best))
            merged[out] = merged.get(out, 0) + n
        words = merged
    return ranks


def bpe_gpt2(piece: bytes, merge_rank):
    """OpenAI's encoder.py: merge every occurrence of the lowest-ranked bigram per pass."""
    word = [bytes([b]) for b in piece]
    while len(word) > 1:
        pairs = set(zip(word, word[1:]))
        best = min(pairs, key=lambda pair: merge_rank.get(pair, float("inf")))
        if best not in merge_rank:
            break
        word = merge_pair(word, best)
    return word


def bpe_tiktoken(piece: bytes, token_rank):
    """tiktoken's _byte_pair_merge, after its whole-piece lookup."""
    if piece in token_rank:
        return [piece]
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = token_rank.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


def encode(data: bytes, pattern: str, bpe, table, token_id, special_id):
    ids = []
    for k, chunk in enumerate(data.split(SPECIAL.encode())):
        if k > 0:
            ids.append(special_id)
        for p in pieces(chunk, pattern):
            ids.extend(token_id[t] for t in bpe(p, table))
    return ids


CASES = [
    "Hello world", "It's", "it's they're we've I'm you'll he'd don't", "IT'S THEY'RE WE'VE I'M YOU'LL HE'D",
    "'s 't 're 've 'm 'll 'd", "dog's's", "a  b   c    d", "   leading", "trailing   ", "   ",
    "\n", "\n\n\n", "line\nline\r\nline\r\r\n", "tabs\t\tand\t spaces \t", " \n \n ", "x \n\n y",
    "12345", "1234567890", "3.14159", "2024-11-26", "a1b2c3", "v1.2.3-rc4", "١٢٣ ٤٥٦",
    "!!!???...", "hello,world", "(a)[b]{c}", "end.", "... --- ===", "@user #tag $5 %d ^_^ &amp; **bold**",
    "naïve café résumé", "Ünïcödé", "Ελληνικά κείμενα", "Привет, мир!", "日本語のテキストです。", "e\u0301 n\u0303",
    "👋🌍🎉", "emoji 👋 and 🌍!", "thé quick brown fox", "The quick brown fox jumps over the lazy dog.",
    "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "<|endof", "the <|endoftext|> the",
    "\u00a0nbsp\u2003em\u3000ideographic", "zero\u200bwidth",
]
BYTE_CASES = [
    b"\xff", b"\xff\xfe", b"abc\xffdef", b"\xe2\x82", b"\xe2\x82x", b"\xc0\xaf", b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80", b"  \xff  ", b"it\x80's", b"12\xff34", b"\x00\x01\x02", bytes(range(256)),
]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    ranks = train(TRAINING.encode() + b"\xff\xfe" * 8, 300)  # a merge of bytes that are not UTF-8
    tokens = [bytes([b]) for b in range(256)] + [a + b for a, b in ranks]
    token_id = {t: i for i, t in enumerate(tokens)}
    special_id = len(tokens)
    merge_rank = {pair: k for k, pair in enumerate(ranks)}
    token_rank = dict(token_id)

    def text(t):
        return "".join(BYTE_CHAR[b] for b in t)

    def hf(pre, merges, ignore_merges=False):
        vocab = {text(t): i for i, t in enumerate(tokens)}
        vocab[SPECIAL] = special_id
        return {"version": "1.0", "normalizer": None, "pre_tokenizer": pre,
                "added_tokens": [{"id": special_id, "content": SPECIAL, "special": True}],
                "decoder": {"type": "ByteLevel"},
                "model": {"type": "BPE", "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}}

    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    strings = [text(a) + " " + text(b) for a, b in ranks]
    pairs = [[text(a), text(b)] for a, b in ranks]
    llama_pre = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    files = {"gpt2_strings.json": hf(byte_level, strings), "gpt2_pairs.json": hf(byte_level, pairs),
             "llama3.json": hf(llama_pre, strings, ignore_merges=True)}
    for name, content in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(content, f, ensure_ascii=False)
    with open(os.path.join(out, "llama3.tiktoken"), "w") as f:
        for i, t in enumerate(tokens):
            f.write(base64.b64encode(t).decode() + " " + str(i) + "\n")
    cases = []
    for data in [c.encode() for c in CASES] + BYTE_CASES:
        cases.append({"hex": data.hex(),
                      "gpt2": encode(data, GPT2, bpe_gpt2, merge_rank, token_id, special_id),
                      "llama3": encode(data, LLAMA3, bpe_tiktoken, token_rank, token_id, special_id)})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
