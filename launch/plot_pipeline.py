#!/usr/bin/env python3
"""Draws a pipeline-parallel schedule: one lane per rank, one box per microbatch's pass.

    python3 launch/plot_pipeline.py trace.json [--step N] [-o pipeline.png]
    train_gpt --mesh pipe=2 --dry-run ... > plan.txt; python3 launch/plot_pipeline.py plan.txt -o schedule.png

The input is a Chrome trace from train_gpt --trace (compute spans "F3@s1", "B3@s1", "BI3@s1",
"BW3@s1"; one step is drawn, the last unless --step says) or the timeline --dry-run prints for
a pipe axis ("rank 0 |F0  F1   .  B0 ...|", 4 characters per time unit). It prints each rank's
idle fraction and the mean bubble. With matplotlib (apt-get install python3-matplotlib) it
writes a PNG; without it, an SVG of the same name.
"""
import argparse
import json
import math
import os
import re
from collections import namedtuple
from xml.sax.saxutils import escape

Span = namedtuple("Span", "start dur kind label")
KINDS = {"F": "forward", "B": "backward", "BI": "backward-input", "b": "backward-input",
         "BW": "backward-weight", "w": "backward-weight"}
COLOURS = {"forward": "steelblue", "backward": "darkorange", "backward-input": "sandybrown",
           "backward-weight": "seagreen"}
TRACE_NAME = re.compile(r"(F|B|BI|BW)(\d+)@s(\d+)$")
TIMELINE_ROW = re.compile(r"^rank (\d+) \|(.*)\|$")
TIMELINE_LABEL = re.compile(r"([FBbw])(\d+)([a-z]?)$")
CELL = 4  # characters per time unit in the dry-run timeline


def stage(event):
    return int(TRACE_NAME.match(event["name"])[3])


def trace_steps(events):
    """Each rank's compute spans in time order, split into steps: {pid: [[event, ...], ...]}."""
    by_rank = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "compute" and TRACE_NAME.match(e["name"]):
            by_rank.setdefault(e["pid"], []).append(e)
    steps = {}
    for pid, spans in by_rank.items():
        spans.sort(key=lambda e: e["ts"])
        first = f"F0@s{min(stage(e) for e in spans)}"
        steps[pid] = []
        for e in spans:
            if e["name"] == first or not steps[pid]:
                steps[pid].append([])
            steps[pid][-1].append(e)
    return steps


def trace_span(event, zero, stages):
    """A span in ms from zero, labelled with its microbatch (and chunk letter if interleaved)."""
    kind, microbatch, stage_index = TRACE_NAME.match(event["name"]).groups()
    chunk = chr(ord("a") + stages.index(int(stage_index))) if len(stages) > 1 else ""
    return Span((event["ts"] - zero) / 1e3, event["dur"] / 1e3, KINDS[kind], microbatch + chunk)


def read_trace(trace, step):
    """The lanes of one step ({pid: [Span]}), its 1-based number and the trace's step count."""
    steps = trace_steps(trace["traceEvents"])
    if not steps:
        raise SystemExit("the trace has no compute spans")
    count = min(len(s) for s in steps.values())
    number = count if step is None else step
    if not 1 <= number <= count:
        raise SystemExit(f"--step {step}: the trace holds steps 1..{count}")
    chosen = {pid: s[number - 1] for pid, s in steps.items()}
    zero = min(e["ts"] for spans in chosen.values() for e in spans)
    lanes = {}
    for pid, spans in chosen.items():
        stages = sorted({stage(e) for e in spans})
        lanes[pid] = [trace_span(e, zero, stages) for e in spans]
    return lanes, number, count


def timeline_spans(row):
    """A box per label; it extends over the following all-blank cells ("." cells are idle)."""
    spans = []
    for col in range(len(row) // CELL):
        cell = row[col * CELL:(col + 1) * CELL]
        label = TIMELINE_LABEL.match(cell.strip())
        if label:
            spans.append(Span(col, 1, KINDS[label[1]], label[2] + label[3]))
        elif not cell.strip() and spans and spans[-1].start + spans[-1].dur == col:
            spans[-1] = spans[-1]._replace(dur=spans[-1].dur + 1)
    return spans


def read_timeline(text):
    rows = [TIMELINE_ROW.match(line.rstrip()) for line in text.splitlines()]
    lanes = {int(m[1]): timeline_spans(m[2]) for m in rows if m}
    if not lanes:
        raise SystemExit("no 'rank N |...|' timeline rows: was the dry run given a pipe axis?")
    return lanes


def end_of(lanes):
    return max(s.start + s.dur for spans in lanes.values() for s in spans)


def summarize(lanes, unit):
    end = end_of(lanes)
    idle = []
    for rank in sorted(lanes):
        busy = sum(s.dur for s in lanes[rank])
        idle.append(1 - busy / end)
        print(f"rank {rank}: busy {busy:.4g} {unit} of {end:.4g} {unit}, idle {100 * idle[-1]:.1f}%")
    print(f"bubble (mean idle fraction over ranks): {100 * sum(idle) / len(idle):.1f}%")


def fits(span, end):
    """Whether a box is wide enough (relative to the whole step) for its label."""
    return span.dur / end > 0.02


def kinds_used(lanes):
    used = {s.kind for spans in lanes.values() for s in spans}
    return [k for k in COLOURS if k in used]


def plot_png(lanes, xlabel, title, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ranks, end = sorted(lanes), end_of(lanes)
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(ranks) + 1.6))
    for row, rank in enumerate(ranks):
        for s in lanes[rank]:
            ax.barh(row, s.dur, left=s.start, height=0.8, color=COLOURS[s.kind], edgecolor="black", linewidth=0.5)
            if fits(s, end):
                ax.text(s.start + s.dur / 2, row, s.label, ha="center", va="center", fontsize=8)
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set(xlabel=xlabel, title=title, xlim=(0, end))
    ax.legend(handles=[Patch(color=COLOURS[k], label=k) for k in kinds_used(lanes)],
              loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def ticks(end, count=10):
    """Round tick positions (steps of 1, 2 or 5 times a power of ten) from 0 to end."""
    raw = end / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(end / step + 1e-9) + 1)]


def plot_svg(lanes, xlabel, title, out):
    ranks, end = sorted(lanes), end_of(lanes)
    left, top, width, lane = 80, 40, 900, 30
    axis_y = top + lane * len(ranks)

    def x(t):
        return left + t * width / end

    text = '<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="{}">{}</text>'
    parts = [text.format(left + width / 2, 22, 15, "middle", escape(title))]
    for row, rank in enumerate(ranks):
        y = top + row * lane
        parts.append(text.format(left - 8, y + lane / 2 + 4, 12, "end", f"rank {rank}"))
        for s in lanes[rank]:
            parts.append(f'<rect x="{x(s.start):.2f}" y="{y + 3}" width="{x(s.dur) - left:.2f}" height="{lane - 6}" '
                         f'fill="{COLOURS[s.kind]}" stroke="black" stroke-width="0.5"/>')
            if fits(s, end):
                parts.append(text.format(x(s.start + s.dur / 2), y + lane / 2 + 4, 10, "middle", escape(s.label)))
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + width}" y2="{axis_y}" stroke="black"/>')
    for t in ticks(end):
        parts.append(f'<line x1="{x(t):.2f}" y1="{axis_y}" x2="{x(t):.2f}" y2="{axis_y + 5}" stroke="black"/>')
        parts.append(text.format(x(t), axis_y + 18, 11, "middle", f"{t:g}"))
    parts.append(text.format(left + width / 2, axis_y + 36, 12, "middle", escape(xlabel)))
    for i, kind in enumerate(kinds_used(lanes)):
        parts.append(f'<rect x="{left + 160 * i}" y="{axis_y + 50}" width="12" height="12" fill="{COLOURS[kind]}"/>')
        parts.append(text.format(left + 160 * i + 18, axis_y + 60, 11, "start", kind))
    with open(out, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{axis_y + 75}" '
                f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n')
        f.write("\n".join(parts) + "\n</svg>\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="Chrome trace JSON (train_gpt --trace) or dry-run text (train_gpt --dry-run)")
    parser.add_argument("--step", type=int, help="training step of the trace to draw, 1-based (default: the last)")
    parser.add_argument("-o", "--output", default="pipeline.png", help="PNG to write (SVG without matplotlib)")
    parser.add_argument("--title", help="picture title (default: from the file name)")
    args = parser.parse_args()
    with open(args.input) as f:
        content = f.read()
    title = os.path.basename(args.input)
    if content.lstrip().startswith("{"):
        lanes, number, count = read_trace(json.loads(content), args.step)
        unit, xlabel, title = "ms", "time (ms)", f"{title}: step {number} of {count}"
    else:
        lanes, unit, xlabel = read_timeline(content), "units", "time units"
    title = args.title or title
    summarize(lanes, unit)
    try:
        plot_png(lanes, xlabel, title, args.output)
    except ImportError:
        out = os.path.splitext(args.output)[0] + ".svg"
        plot_svg(lanes, xlabel, title, out)
        print(f"matplotlib is not installed: wrote {out} instead of {args.output}")


if __name__ == "__main__":
    main()
