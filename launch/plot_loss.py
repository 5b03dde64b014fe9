#!/usr/bin/env python3
"""Plots training and held-out loss (and answer accuracy) from train_gpt's JSONL metrics,
or with --perf where the time goes: MFU, communication per axis and the step time, each
measured beside its prediction.

    python3 launch/plot_loss.py [runs/metrics.jsonl ...] [-o loss.png]
    python3 launch/plot_loss.py --perf [runs/metrics.jsonl ...] [-o perf.png]

A file holding several runs (train_gpt appends a fresh run to an existing file) is shown
run by run. With matplotlib (apt-get install python3-matplotlib) it writes a PNG; without it, it
prints a text chart of the training loss and a table of the evaluations (--perf: a table
of medians).
"""
import argparse
import json
import math
import sys


def read_runs(path):
    """The runs in one metrics file, by name: train_gpt appends a fresh run's rows to an
    existing file, and a step not above the one before starts the next run."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a row cut short by a killed run
                if line.strip():
                    print(f"{path}:{number}: not a whole JSON row, passed over", file=sys.stderr)
    runs = []
    for row in rows:
        if not runs or row["step"] <= runs[-1][-1]["step"]:
            runs.append([])
        runs[-1].append(row)
    if len(runs) <= 1:
        return {path: rows}
    return {f"{path} (run {i + 1} of {len(runs)})": run for i, run in enumerate(runs)}


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


def median(values):
    values = sorted(values)
    n = len(values)
    return (values[(n - 1) // 2] + values[n // 2]) / 2 if n else float("nan")


def comm_axes(rows):
    """The axes with communication in the metrics: 'exposed' (the data axes' exposed part)
    and each model axis that logs <axis>_comm_s."""
    axes = ["exposed"] if any("exposed_comm_s" in r for r in rows) else []
    return axes + sorted({k[:-len("_comm_s")] for r in rows for k in r if k.endswith("_comm_s") and k != "exposed_comm_s"})


def comm_key(axis, predicted=False):
    if axis == "exposed":
        return None if predicted else "exposed_comm_s"
    return f"{axis}_comm_predicted_s" if predicted else f"{axis}_comm_s"


def plot_perf_png(runs, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (mfu_ax, comm_ax, step_ax) = plt.subplots(1, 3, figsize=(15, 4))
    for name, rows in runs.items():
        line, = mfu_ax.plot(*zip(*[(s, 100 * m) for s, m in series(rows, "mfu")]), lw=1, label=name)
        for axis in comm_axes(rows):
            measured = series(rows, comm_key(axis))
            c, = comm_ax.plot(*zip(*[(s, 1e3 * v) for s, v in measured]), lw=1, label=f"{name} {axis}")
            if comm_key(axis, True) and series(rows, comm_key(axis, True)):
                comm_ax.plot(*zip(*[(s, 1e3 * v) for s, v in series(rows, comm_key(axis, True))]), "--",
                             color=c.get_color(), label=f"{name} {axis} predicted")
        step_ax.plot(*zip(*[(s, 1e3 * v) for s, v in series(rows, "step_s")]), lw=1, color=line.get_color(),
                     label=f"{name} measured")
        if series(rows, "step_predicted_s"):
            step_ax.plot(*zip(*[(s, 1e3 * v) for s, v in series(rows, "step_predicted_s")]), "--",
                         color=line.get_color(), label=f"{name} predicted")
    mfu_ax.set(xlabel="step", ylabel="% of the measured peak", title="MFU")
    comm_ax.set(xlabel="step", ylabel="ms per step", title="communication per axis (exposed)")
    step_ax.set(xlabel="step", ylabel="ms", title="step time")
    for ax in (mfu_ax, comm_ax, step_ax):
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def perf_text(runs):
    for name, rows in runs.items():
        def med(key, scale=1e3):
            values = [v for _, v in series(rows, key)] if key else []
            return f"{scale * median(values):.2f}" if values else "-"
        print(f"{name}: medians over {len(rows)} steps")
        print(f"  step {med('step_s')} ms (predicted {med('step_predicted_s')} ms) | MFU {med('mfu', 100)}%")
        for axis in comm_axes(rows):
            print(f"  comm {axis}: {med(comm_key(axis))} ms (predicted {med(comm_key(axis, True))} ms)")
        print()


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
    parser.add_argument("-o", "--output", help="PNG to write when matplotlib is available (loss.png, perf.png)")
    parser.add_argument("--text", action="store_true", help="print the text chart even if matplotlib is available")
    parser.add_argument("--perf", action="store_true", help="MFU, communication per axis, step time vs predicted")
    args = parser.parse_args()
    runs = {name: rows for path in args.metrics for name, rows in read_runs(path).items()}
    text = perf_text if args.perf else plot_text
    if args.text:
        return text(runs)
    try:
        if args.perf:
            plot_perf_png(runs, args.output or "perf.png")
        else:
            plot_png(runs, args.output or "loss.png")
    except ImportError as missing:
        print(f"no PNG: {missing} in {sys.executable} (apt-get install python3-matplotlib and run it with "
              f"/usr/bin/python3); text instead:\n")
        text(runs)


if __name__ == "__main__":
    main()
