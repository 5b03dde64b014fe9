#!/usr/bin/python3
"""PyTorch decode beside shardlab's: the same GPT shape, greedy decoding with a KV cache.

The model of bench/decode_bench.sh (GPT-2 style, V 256, T 256, D 768, L 6, N 12, F 3072,
fp32, random weights: a decode step's time depends on the shapes only). The cache is
preallocated per layer as [B, N, context, H] and each step writes its keys and values in
place (no per-token concatenation); prompts of 16 tokens are prefilled once, then every
timed step decodes one token of every row, as `generate --prompts` does. Prints ms per
decode step (median over the steps of several runs) per batch, and, given the CSV that
`bench/decode_bench.sh build out.csv` writes, shardlab's measured step and the prediction
beside it.

    /usr/bin/python3 bench/torch_decode_bench.py --threads 2 [--shardlab-csv decode.csv]
"""
import argparse
import csv
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, k_cache, v_cache, start):
        B, n, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, n, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        k_cache[:, :, start:start + n] = k  # in place: the cache is never copied
        v_cache[:, :, start:start + n] = v
        keys, values = k_cache[:, :, :start + n], v_cache[:, :, :start + n]
        s = (q @ keys.transpose(-1, -2)) / self.hd ** 0.5
        if n > 1:  # prefill: causal within the new positions
            s = s + torch.full((n, start + n), float("-inf")).triu(start + 1)
        y = (F.softmax(s, dim=-1) @ values).transpose(1, 2).reshape(B, n, D)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, ctx, d, layers, heads, ff):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids, caches, start):
        x = self.wte(ids) + self.wpe(torch.arange(start, start + ids.shape[1]))
        for block, (k, v) in zip(self.blocks, caches):
            x = block(x, k, v, start)
        return self.ln_f(x[:, -1]) @ self.wte.weight.t()  # tied head, last position only


def decode_steps(model, args, batch):
    """Seconds of each decode step of one generation of args.new tokens per row."""
    hd = args.d // args.heads
    caches = [(torch.zeros(batch, args.heads, args.ctx, hd), torch.zeros(batch, args.heads, args.ctx, hd))
              for _ in model.blocks]
    ids = torch.randint(0, args.vocab, (batch, args.prompt))
    logits = model(ids, caches, 0)
    times = []
    for i in range(args.new - 1):
        t = time.perf_counter()
        logits = model(logits.argmax(-1, keepdim=True), caches, args.prompt + i)
        times.append(time.perf_counter() - t)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", default="1,2,4,8")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ff", type=int, default=3072)
    p.add_argument("--shardlab-csv", help="decode_bench.sh's CSV: shardlab's measured and predicted step")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Gpt(args.vocab, args.ctx, args.d, args.layers, args.heads, args.ff).eval()
    shard = {}
    if args.shardlab_csv:
        with open(args.shardlab_csv) as f:
            shard = {int(r["batch"]): r for r in csv.DictReader(f)}
    weights = sum(t.numel() for t in model.parameters())
    print(f"PyTorch {torch.__version__}, {args.threads} threads, {weights / 1e6:.1f}M fp32 weights; "
          f"ms per decode step, median of {args.runs} x {args.new - 1} steps")
    print(f"{'batch':>6} {'torch ms':>10} {'shardlab ms':>12} {'predicted ms':>13} {'shardlab/torch':>15}")
    with torch.inference_mode():
        decode_steps(model, args, 1)  # warm-up
        for b in (int(x) for x in args.batches.split(",")):
            ms = 1e3 * statistics.median(t for _ in range(args.runs) for t in decode_steps(model, args, b))
            row = shard.get(b)
            ours = f"{1e3 * float(row['step_s']):12.2f} {1e3 * float(row['predicted_step_s']):13.2f} " \
                   f"{1e3 * float(row['step_s']) / ms:15.2f}" if row else f"{'-':>12} {'-':>13} {'-':>15}"
            print(f"{b:6d} {ms:10.2f} {ours}")


if __name__ == "__main__":
    main()
