#!/usr/bin/env python3
"""Plots an experiment's CSV (bench/experiments/*.sh), measured beside the book's prediction.

    python3 bench/experiments/plot.py pipeline_bubble runs/experiments/pipeline_bubble.csv -o bubble.png
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def pipeline_bubble(rows, ax):
    for schedule in dict.fromkeys(r["schedule"] for r in rows):
        mine = [r for r in rows if r["schedule"] == schedule]
        m = [int(r["microbatches"]) for r in mine]
        line, = ax.plot(m, [100 * float(r["bubble"]) for r in mine], "o-", label=f"{schedule} measured")
        ax.plot(m, [100 * float(r["bubble_predicted"]) for r in mine], "--", color=line.get_color(),
                label=f"{schedule} predicted")
    ax.set(xscale="log", xlabel="microbatches m (pipe=2)", ylabel="bubble, % of the step",
           title="Pipeline bubble against microbatches")
    ax.set_xscale("log", base=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", choices=["pipeline_bubble"])
    ap.add_argument("csv")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    globals()[args.experiment](read(args.csv), ax)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
