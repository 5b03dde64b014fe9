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


def tp_degree(rows, ax):
    fy = [int(r["d_ff"]) / 2 for r in rows]  # Y = 2
    ax.plot(fy, [1e3 * float(r["compute_s"]) for r in rows], "o-", label="compute (measured)")
    ax.plot(fy, [1e3 * float(r["comm_s"]) for r in rows], "s-", label="tensor communication (measured)")
    ax.plot(fy, [1e3 * float(r["comm_predicted_s"]) for r in rows], "--", color="gray",
            label="tensor communication (cost model)")
    ax.set(xscale="log", yscale="log", xlabel="F / Y, MLP columns per rank (Y = 2)", ylabel="ms per step",
           title="Tensor parallelism: exposed until F/Y reaches the critical width")
    ax.set_xscale("log", base=2)


def fsdp_tp(rows, ax):
    for f in dict.fromkeys(r["d_ff"] for r in rows):
        for x, y in dict.fromkeys((r["fsdp"], r["tensor"]) for r in rows):
            mine = [r for r in rows if r["d_ff"] == f and r["fsdp"] == x and r["tensor"] == y]
            t = [int(r["tokens"]) for r in mine]
            line, = ax.plot(t, [1e3 * float(r["step_s"]) for r in mine], "o-", label=f"F={f} fsdp={x} tensor={y}")
            ax.plot(t, [1e3 * float(r["step_predicted_s"]) for r in mine], "--", color=line.get_color(), lw=0.8)
        ax.axvline(int(f), color="black", lw=0.6, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="global batch, tokens (dotted: the book's B* = F)",
           ylabel="ms per step (dashed: cost model)", title="FSDP against TP: the crossover moves with F")
    ax.set_xscale("log", base=2)


def moe_critical_batch(rows, ax):
    dense = next(r for r in rows if r["E"] == "0")
    moe = [r for r in rows if r["E"] != "0"]
    label = [f"E={r['E']} k={r['k']}" for r in moe]
    x = range(len(moe))
    ax.plot(x, [int(r["E"]) / int(r["k"]) for r in moe], "k:", marker="_", ms=20, label="E/k (the MoE layer alone)")
    ax.plot(x, [float(r["formula_tokens"]) / float(dense["formula_tokens"]) for r in moe], "o--",
            label="formula, whole model")
    if dense["measured_tokens"] != "nan":
        ax.plot(x, [float(r["measured_tokens"]) / float(dense["measured_tokens"]) if r["measured_tokens"] != "nan"
                    else float("nan") for r in moe], "s-", label="measured")
    ax.set_xticks(list(x), label)
    ax.set(ylabel="critical batch / dense model's", title="MoE: the critical batch grows with E/k")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", choices=["pipeline_bubble", "tp_degree", "fsdp_tp", "moe_critical_batch"])
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
