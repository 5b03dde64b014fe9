#!/usr/bin/env python3
"""Plots bench/decode_bench.sh's CSV: decode tokens/s and step time against batch size,
measured beside the cost model's prediction (log-log): flat step time and tokens/s growing
with the batch while memory-bound, then step time growing once the weight matmuls turn
compute-bound.

    python3 bench/plot_decode.py decode.csv -o docs/decode_batch.png
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("-o", "--output", default="decode_batch.png")
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    batch = [r["batch"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(batch, [r["tokens_per_s"] for r in rows], "o-", label="measured")
    left.plot(batch, [r["predicted_tokens_per_s"] for r in rows], "s--", label="predicted (local profile)")
    left.set_ylabel("decode tokens/s")
    right.plot(batch, [r["step_s"] * 1e3 for r in rows], "o-", label="measured")
    right.plot(batch, [r["predicted_step_s"] * 1e3 for r in rows], "s--", label="predicted (local profile)")
    right.set_ylabel("ms per decode step")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences decoded together)")
        ax.legend(fontsize=8)
    fig.suptitle("Decode: memory-bound at small batch, compute-bound past the critical batch")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
