#!/usr/bin/env bash
# doc_snippets.sh REPO BUILD: runs every snippet of README.md and docs/*.md marked
# runnable, so that the documentation cannot go stale unnoticed.
#
# A snippet is marked by its fence: ```bash runnable or ```python runnable (renderers
# still highlight it as bash or python). An HTML comment on the line just above the fence,
# <!-- before: COMMAND -->, runs COMMAND first (to make the files the snippet reads). A
# block fenced ```text expected-output after a runnable snippet is what it prints: each of
# its lines other than "..." must be a line of the snippet's output (spaces compared as
# runs), so a figure that changes shows up here.
# Every other fenced block must say what it is, so that no command goes unchecked by
# accident: a block with no language fails the test, and so does a command block --
# fenced bash, sh, shell, console or python, or any block whose first line is a "$ "
# prompt -- that is neither runnable nor marked ```bash illustration (or ```console
# illustration ...): shown, never run (a long job, another machine, an abridged output).
# The snippets of one document run in order in one scratch directory (a document is read
# top-down: a later snippet may use what an earlier one wrote), holding links to the
# repository's folders, with `build` linking to BUILD and BUILD/examples on PATH, so
# `train_gpt` and `build/examples/train_gpt` both work and what they write stays there. Python
# snippets run under /usr/bin/python3, Debian's, with h5py and numpy (launch/test.sh
# installs python3-h5py); where that cannot import h5py they are skipped, saying so,
# and the test reports skipped (exit 77) once the shell snippets have passed.
set -euo pipefail
repo=$(cd "$1" && pwd); build=$(cd "$2" && pwd)
export PATH="$build/examples:$PATH" OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# One file per snippet: N.sh or N.py, its place N.where ("file:line"), N.before, N.expect.
(cd "$repo" && awk -v out="$tmp" '
  function unchecked(why) { print FILENAME ":" FNR ": " why > (out "/unchecked") }
  FNR == 1 { before = ""; before_line = -1; plain = 0 }
  plain && /^```/ { plain = 0; next }
  plain == 1 { plain = 2; if (/^\$ / && info !~ / illustration$/) unchecked("a \"$ \" command in a block not marked runnable or illustration") }
  plain { next }
  /^<!-- before: .* -->$/ { before = $0; sub(/^<!-- before: /, "", before); sub(/ -->$/, "", before); before_line = FNR; next }
  !inside && /^```(bash|python) runnable/ {
    n++; inside = 1; body = out "/" n ($0 ~ /python/ ? ".py" : ".sh")
    print FILENAME ":" FNR > (out "/" n ".where")
    if (before_line == FNR - 1) print before > (out "/" n ".before")
    printf "" > body
    next
  }
  !inside && /^```text expected-output/ && n > 0 && last_file == FILENAME {
    inside = 1; body = out "/" n ".expect"; printf "" > body; next
  }
  inside && /^```/ { inside = 0; close(body); last_file = FILENAME; next }
  inside { print >> body; next }
  /^```/ {
    plain = 1; info = substr($0, 4); lang = info; sub(/ .*/, "", lang)
    if (info == "") unchecked("a block with no language (text for output, bash runnable or bash illustration for commands)")
    else if (lang ~ /^(bash|sh|shell|console|python)$/ && info !~ / illustration$/)
      unchecked("a " lang " block neither runnable nor marked illustration")
  }
' README.md docs/*.md)
if [ -s "$tmp/unchecked" ]; then
  echo "FAIL: command blocks the test does not check; fence each \`\`\`bash runnable (checked) or \`\`\`bash illustration:"
  sed 's/^/  /' "$tmp/unchecked"; exit 1
fi

python_ok=1
/usr/bin/python3 -c "import h5py, numpy" 2>/dev/null || python_ok=0
ran=0; skipped=0
for where in $(ls "$tmp"/*.where 2>/dev/null | sort -V); do
  n=$(basename "$where" .where); at=$(cat "$where")
  body=$tmp/$n.sh; [ -f "$body" ] || body=$tmp/$n.py
  if [[ $body == *.py && $python_ok == 0 ]]; then
    echo "skip $at: /usr/bin/python3 cannot import h5py and numpy (apt-get install python3-h5py)"
    skipped=$((skipped + 1)); continue
  fi
  scratch=$tmp/scratch_$(basename "${at%%:*}" .md)
  if [ ! -d "$scratch" ]; then
    mkdir "$scratch"
    for entry in "$repo"/*; do [ "$(basename "$entry")" = build ] || ln -s "$entry" "$scratch/"; done
    ln -s "$build" "$scratch/build"
  fi
  log=$tmp/$n.log
  run_it() {
    if [ -f "$tmp/$n.before" ]; then bash -euo pipefail "$tmp/$n.before"; fi
    if [[ $body == *.py ]]; then /usr/bin/python3 "$body"; else bash -euo pipefail "$body"; fi
  }
  if ! (cd "$scratch" && timeout 300 bash -c "$(declare -f run_it); tmp='$tmp' n='$n' body='$body' run_it") > "$log" 2>&1; then
    echo "FAIL: the snippet at $at does not run:"; sed 's/^/  /' "$body"; echo "its output:"; tail -20 "$log"
    exit 1
  fi
  if [ -f "$tmp/$n.expect" ]; then
    # One awk for all the lines (a sed and a grep per line was a third of the test's time).
    stale=$(awk '
      function squeeze(s) { gsub(/[[:space:]]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); return s }
      FNR == NR { printed[squeeze($0)] = 1; next }
      $0 == "..." || $0 == "" { next }
      !(squeeze($0) in printed) { print; exit }
    ' "$log" "$tmp/$n.expect")
    if [ -n "$stale" ]; then
      echo "FAIL: the output shown after the snippet at $at is stale; this line is no longer printed:"
      echo "  $stale"; echo "the snippet prints:"; sed 's/^/  /' "$log"; exit 1
    fi
  fi
  echo "ok $at"
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "FAIL: no snippet marked runnable in $repo"; exit 1; }
echo "$ran snippets ran, $skipped skipped"
[ "$skipped" -eq 0 ] || exit 77
