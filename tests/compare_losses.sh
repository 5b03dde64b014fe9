# Shell helper for the checkpoint-across-layouts tests (source it).
#
# compare_losses DIR STEPS RUN...: each DIR/RUN.jsonl (train_gpt --metrics) has STEPS
# steps whose losses are within 1e-4 relative of DIR/full.jsonl's, the uninterrupted
# single-process run (layouts differ in fp32 summation order); prints each difference,
# returns non-zero if any.
compare_losses() {
  local dir=$1 steps=$2 status=0 run
  shift 2
  losses() { grep -o '"loss": [^,]*' "$1" | awk '{print $2}'; }
  for run in "$@"; do
    if ! paste <(losses "$dir/full.jsonl") <(losses "$dir/$run.jsonl") | awk -v run="$run" -v steps="$steps" '
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) { print run ": step " NR " loss " $2 " vs uninterrupted " $1; bad = 1 } }
        END { if (n != steps) { print run ": " n " steps, expected " steps; bad = 1 } exit bad }'; then
      status=1
    fi
  done
  return $status
}
