#!/usr/bin/env python3
"""Rewrites the measured parts of docs/experiments.md from run_all.sh's outputs.

    python3 bench/experiments/report.py runs/experiments docs/experiments.md

Each measured part of the document sits between `<!-- measured: NAME -->` and
`<!-- end -->`; NAME is an output of run_all.sh in the directory (NAME.txt, the
experiment's printed table, verbatim). Everything else in the document is left as written.
"""
import os
import re
import sys


def main():
    out_dir, doc = sys.argv[1], sys.argv[2]
    text = open(doc).read()

    def replace(match):
        name = match.group(1)
        path = os.path.join(out_dir, name + ".txt")
        if not os.path.exists(path):
            print(f"report: no {path}; keeping the section '{name}' as it was")
            return match.group(0)
        body = open(path).read().rstrip("\n")
        return f"<!-- measured: {name} -->\n```\n{body}\n```\n<!-- end -->"

    new = re.sub(r"<!-- measured: (\w+) -->\n.*?<!-- end -->", replace, text, flags=re.S)
    open(doc, "w").write(new)
    print(f"rewrote {doc}")


if __name__ == "__main__":
    main()
