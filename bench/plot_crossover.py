#!/usr/bin/env python3
"""Plots bench/crossover.sh's CSV: compute and all-reduce time per step against tokens per
rank (log-log), the all-reduce left exposed when it overlaps backward, and the formula's
all-reduce time and crossover.

    python3 bench/plot_crossover.py runs/crossover/crossover.csv --t-ar 0.38 -o crossover.png
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--t-ar", type=float, required=True, help="the formula's all-reduce seconds")
    ap.add_argument("-o", "--output", default="crossover.png")
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    tokens = [r["tokens_per_rank"] for r in rows]
    ms = lambda key: [r[key] * 1e3 for r in rows]  # noqa: E731
    per_token = rows[-1]["compute_s"] / rows[-1]["tokens_per_rank"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(tokens, ms("compute_s"), "o-", label="compute (measured)")
    ax.plot(tokens, ms("allreduce_s"), "s-", label="all-reduce, not overlapped (measured)")
    ax.plot(tokens, [max(v, 1e-2) for v in ms("exposed_overlap_s")], "^--", label="all-reduce exposed with overlap")
    ax.axhline(args.t_ar * 1e3, color="gray", lw=0.8, ls=":", label="all-reduce, formula")
    ax.axvline(args.t_ar / per_token, color="black", lw=0.8, ls=":", label="crossover, formula")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per rank per step")
    ax.set_ylabel("ms per step")
    ax.set_title("Data parallelism: communication-bound to compute-bound")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
