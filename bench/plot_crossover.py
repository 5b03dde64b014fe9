#!/usr/bin/env python3
"""Plots bench/crossover.sh's CSV: compute and communication time per step against tokens
per rank (log-log), the communication left exposed when it overlaps compute, and the
formula's communication time and crossover.

    python3 bench/plot_crossover.py runs/crossover/crossover.csv --t-ar 0.38 -o crossover.png
"""
import argparse
import csv
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--t-ar", type=float, required=True, help="the formula's communication seconds")
    ap.add_argument("--title", default="Data parallelism")
    ap.add_argument("-o", "--output", default="crossover.png")
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    tokens = [r["tokens_per_rank"] for r in rows]
    ms = lambda key: [r[key] * 1e3 for r in rows]  # noqa: E731
    # compute per token at the point whose compute is nearest the communication time (the
    # nearest to the crossover), as crossover.sh takes it
    nearest = min(rows, key=lambda r: abs(math.log(r["compute_s"] / args.t_ar)))
    per_token = nearest["compute_s"] / nearest["tokens_per_rank"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(tokens, ms("compute_s"), "o-", label="compute (measured)")
    comm = "comm_s" if "comm_s" in rows[0] else "allreduce_s"  # older CSVs
    ax.plot(tokens, ms(comm), "s-", label="communication, not overlapped (measured)")
    exposed = [(t, max(v, 1e-2)) for t, v in zip(tokens, ms("exposed_overlap_s")) if v == v]  # nan: not run
    if exposed:
        ax.plot(*zip(*exposed), "^--", label="communication exposed with overlap")
    ax.axhline(args.t_ar * 1e3, color="gray", lw=0.8, ls=":", label="communication, cost model")
    ax.axvline(args.t_ar / per_token, color="black", lw=0.8, ls=":", label="crossover, formula")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per rank per step")
    ax.set_ylabel("ms per step")
    ax.set_title(f"{args.title}: communication-bound to compute-bound")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
