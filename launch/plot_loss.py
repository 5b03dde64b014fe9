#!/usr/bin/env python3
"""Plots training and held-out loss (and answer accuracy) from train_gpt's JSONL metrics.

    python3 launch/plot_loss.py [runs/metrics.jsonl ...] [-o loss.png]

With matplotlib (apt-get install python3-matplotlib) it writes a PNG; without it, it
prints a text chart of the training loss and a table of the evaluations.
"""
import argparse
import json
import math
import sys


def read_rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def series(rows, key):
    return [(r["step"], r[key]) for r in rows if r.get(key) is not None]


def plot_png(runs, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_acc = any(series(rows, "eval_accuracy") for rows in runs.values())
    fig, axes = plt.subplots(1, 2 if has_acc else 1, figsize=(11 if has_acc else 6, 4), squeeze=False)
    loss_ax = axes[0][0]
    for name, rows in runs.items():
        steps, loss = zip(*series(rows, "loss"))
        line, = loss_ax.plot(steps, loss, lw=1, label=f"{name} train")
        if series(rows, "eval_loss"):
            loss_ax.plot(*zip(*series(rows, "eval_loss")), "o--", color=line.get_color(), label=f"{name} held-out")
        if has_acc and series(rows, "eval_accuracy"):
            steps, acc = zip(*series(rows, "eval_accuracy"))
            axes[0][1].plot(steps, [100 * a for a in acc], "o-", label=name)
    loss_ax.set(xlabel="step", ylabel="loss (nats/token)", title="loss")
    loss_ax.legend()
    if has_acc:
        axes[0][1].set(xlabel="step", ylabel="%", title="held-out answer exact-match", ylim=(0, 100))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def plot_text(runs, width=60, height=15):
    for name, rows in runs.items():
        points = series(rows, "loss")
        if not points:
            continue
        # One column per bucket of steps (mean loss), rows from the highest loss down.
        buckets = [[] for _ in range(min(width, len(points)))]
        for i, (_, loss) in enumerate(points):
            buckets[i * len(buckets) // len(points)].append(loss)
        means = [sum(b) / len(b) for b in buckets]
        lo, hi = min(means), max(means)
        span = (hi - lo) or 1.0
        levels = [height - 1 - round((m - lo) / span * (height - 1)) for m in means]
        print(f"{name}: training loss, steps {points[0][0]}..{points[-1][0]}")
        for row in range(height):
            label = hi - row * span / (height - 1)
            print(f"{label:7.3f} |" + "".join("*" if lv == row else " " for lv in levels))
        print(" " * 8 + "+" + "-" * len(levels))
        evals = [r for r in rows if r.get("eval_loss") is not None]
        if evals:
            print(f"{'step':>8} {'held-out loss':>14} {'exact-match':>12}")
            for r in evals:
                acc = r.get("eval_accuracy")
                acc_text = "-" if acc is None or math.isnan(acc) else f"{100 * acc:.1f}%"
                print(f"{int(r['step']):>8} {r['eval_loss']:>14.4f} {acc_text:>12}")
        print()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("metrics", nargs="*", default=["runs/metrics.jsonl"], help="JSONL files from train_gpt --metrics")
    parser.add_argument("-o", "--output", default="loss.png", help="PNG to write when matplotlib is available")
    parser.add_argument("--text", action="store_true", help="print the text chart even if matplotlib is available")
    args = parser.parse_args()
    runs = {path: read_rows(path) for path in args.metrics}
    if args.text:
        return plot_text(runs)
    try:
        plot_png(runs, args.output)
    except ImportError as missing:
        print(f"no PNG: {missing} in {sys.executable} (apt-get install python3-matplotlib and run it with "
              f"/usr/bin/python3); a text chart instead:\n")
        plot_text(runs)


if __name__ == "__main__":
    main()
